"""bfloat16 in Triton's interpreter, computed as a GPU computes it.

Triton's interpreter (3.9) holds a bfloat16 block as the raw 16 bits of each number in a NumPy ``uint16``
array, since NumPy has no bfloat16, and converts them properly only in a cast to or from float32. Every
other operation reads the bits as integers: ``tl.dot`` of two bfloat16 blocks multiplies integers (errors
near 1e10, measured), ``a + a`` and ``tl.sum`` add them, ``tl.max`` orders negative numbers wrongly, and a
cast from float32 cuts the last 16 bits off where a GPU rounds to the nearest. A kernel that is right on a
GPU gives nonsense on a CPU, and lesson 09's float16/bfloat16 exercise could not be checked there.

``install()`` (called by ``triton_setup.load()`` with the interpreter) puts a widening step in front of those
operations: a bfloat16 operand is widened to float32 (exact: bfloat16 is float32's first 16 bits), the
operation runs in float32, and a bfloat16 result is rounded back to the nearest (ties to even).
That is what a GPU does: its tensor cores multiply bfloat16 exactly and accumulate in float32 (or round to
bfloat16 when the accumulator is bfloat16), and its element-wise bfloat16 arithmetic rounds each result.
A reduction's order differs from a GPU's tree (the sum is exact to float32 and rounded once), so a kernel
that sums bfloat16 numbers can differ from its GPU run in the last bit of the sum: which is why the course
sums in float32.

float16 needs none of this: NumPy has it, and the interpreter computes it as a GPU does.
Pinned like ``triton_bounds``: a Triton whose interpreter lacks one of the methods wrapped here raises
``TritonChanged`` at install instead of leaving bfloat16 half fixed.
"""

import numpy as np

from .triton_bounds import TritonChanged

#: The interpreter's builder methods and reductions wrapped here (all of them, or none).
_BUILDER = ("binary_op", "unary_op", "cast_impl", "create_dot", "create_fma")
_REDUCE = ("sum", "min_max")


def widen(bits):
    """bfloat16 numbers held as uint16 bits (any shape) -> the same numbers as float32, exactly."""
    return (np.asarray(bits).astype(np.uint32) << np.uint32(16)).view(np.float32)


def narrow(values):
    """float32 (or float64) numbers -> bfloat16 bits as uint16, rounded to the nearest, ties to even (a GPU's
    cvt.rn.bf16.f32). In NumPy, not torch: it runs inside a launch, where the kernel rule refuses torch."""
    array = np.asarray(values, dtype=np.float32)
    bits = array.view(np.uint32).astype(np.uint64)
    rounded = ((bits + 0x7FFF + ((bits >> 16) & 1)) >> 16).astype(np.uint16)
    quiet_nan = ((bits >> 16) | 0x0040).astype(np.uint16)  # a NaN stays a NaN, its sign kept
    return np.where(np.isnan(array), quiet_nan, rounded)


def install():
    """Wrap the interpreter's operations on bfloat16 (idempotent)."""
    import triton.language as tl
    from triton.runtime import interpreter

    builder, reduce_ops = getattr(interpreter, "InterpreterBuilder", None), getattr(interpreter, "ReduceOps", None)
    missing = [name for name in _BUILDER if not hasattr(builder, name)] + \
              [name for name in _REDUCE if not hasattr(reduce_ops, name)]
    if missing or not hasattr(interpreter, "TensorHandle"):
        raise TritonChanged(f"Triton's interpreter has no {missing or 'TensorHandle'}: the course's bfloat16 fix is "
                            f"tested with Triton 3.9 (make triton installs it)")
    if getattr(builder.binary_op, "_course_halves", False):
        return
    handle, bf16, f32 = interpreter.TensorHandle, tl.bfloat16, tl.float32

    def is_bf16(h):
        return h.dtype.scalar == bf16

    def wide(h):
        return handle(widen(h.data), f32) if is_bf16(h) else h

    def back(result):  # a float32 result of bfloat16 operands, rounded to bfloat16; a comparison's bools stay
        return handle(narrow(result.data), bf16) if result.data.dtype == np.float32 else result

    raw = {name: getattr(builder, name) for name in _BUILDER}

    def binary_op(self, lhs, rhs, op):
        if is_bf16(lhs) or is_bf16(rhs):
            return back(raw["binary_op"](self, wide(lhs), wide(rhs), op))
        return raw["binary_op"](self, lhs, rhs, op)

    def unary_op(self, arg, op):
        if is_bf16(arg):
            return back(raw["unary_op"](self, wide(arg), op))
        return raw["unary_op"](self, arg, op)

    def cast_impl(self, src, dst_type):
        if dst_type.scalar == bf16 and not is_bf16(src):  # a GPU's cvt.rn: to the nearest, not cut off
            return handle(narrow(src.data.astype(np.float64)), bf16)
        if is_bf16(src) and dst_type.scalar != bf16:
            return raw["cast_impl"](self, wide(src), dst_type)
        return raw["cast_impl"](self, src, dst_type)

    def create_dot(self, a, b, d, input_precision, max_num_imprecise_acc):
        if is_bf16(a) or is_bf16(b) or is_bf16(d):  # products exact in float32, accumulated there
            result = raw["create_dot"](self, wide(a), wide(b), wide(d), input_precision, max_num_imprecise_acc)
            return back(result) if is_bf16(d) else result
        return raw["create_dot"](self, a, b, d, input_precision, max_num_imprecise_acc)

    def create_fma(self, x, y, z):
        if is_bf16(z):
            return back(raw["create_fma"](self, wide(x), wide(y), wide(z)))
        return raw["create_fma"](self, x, y, z)

    raw_sum, raw_min_max = reduce_ops.sum, reduce_ops.min_max

    def reduce_sum(self, input):
        if input.dtype != bf16:
            return raw_sum(self, input)
        total = np.sum(widen(input.handle.data), axis=self.axis, keepdims=self.keep_dims, dtype=np.float32)
        return self.to_tensor(narrow(total).reshape(np.shape(total)), bf16)

    def min_max(self, input, val_reduce_op, idx_reduce_op=None):
        value = input[0] if isinstance(input, tuple) else input
        if value.dtype != bf16:
            return raw_min_max(self, input, val_reduce_op, idx_reduce_op)
        data = widen(value.handle.data)
        result = []
        if val_reduce_op:
            found = val_reduce_op(data, axis=self.axis, keepdims=self.keep_dims)
            result.append(self.to_tensor(narrow(found).reshape(np.shape(found)), bf16))
        if idx_reduce_op:
            result.append(self.to_tensor(idx_reduce_op(data, axis=self.axis, keepdims=self.keep_dims), tl.int32))
        if not result:
            raise ValueError("val_reduce_op and idx_reduce_op are both None")
        return tuple(result) if len(result) == 2 else result[0]

    for name, wrapped in (("binary_op", binary_op), ("unary_op", unary_op), ("cast_impl", cast_impl),
                          ("create_dot", create_dot), ("create_fma", create_fma)):
        wrapped._course_halves = True
        setattr(builder, name, wrapped)
    reduce_ops.sum, reduce_ops.min_max = reduce_sum, min_max
