"""What a learner's function may do while a check runs it: the policy, as tables a reviewer reads line by line.

The machinery that applies them lives apart: ``audit.py`` (no text evaluators, no processes, one thread),
``observe.py`` (the aten operations that run, the course functions on the stack, the Triton launches) and
``kernels.py`` (lesson 09's rule that the kernel is the answer).

Threat model
------------
The learner's function is written by someone who may want the check (or the grader, which runs the same
``Sandbox``) to say "passed" without solving the exercise. It runs in the check's own process, beside the
check, so nothing here is a wall: it is a set of observations taken where every route converges, so that
no new *name* for a forbidden thing walks around them.

- A forbidden computation (a softmax, a log-sum-exp, a fused attention) is recognised by the aten
  operation that runs it, at the dispatcher: ``torch.special.softmax``, ``F.scaled_dot_product_attention``
  with an identity value, ``nn.MultiheadAttention``, a ``torch._C`` route or a ``DisableTorchFunction``
  block all end in ``aten._softmax``, ``aten._safe_softmax`` ... The names an exercise forbids are still
  watched, for an earlier and friendlier message.
- A course function that solves the exercise is recognised on the stack while any aten operation runs, by
  its code object and by its code's content (a copy made with ``code.replace`` or ``types.FunctionType``
  is the same code), whatever name reached it. Where the exercise is a course function written again
  (OWN_CODE), any course function that runs is refused, by the module its code belongs to: one that computes
  the answer under another name needs no listing.
- While the function runs, nothing turns text into code (``compile``, ``eval``, ``exec``, a parser that
  evaluates), starts a process, loads a C library, opens a socket, changes the tracer or the audit hooks,
  reads the garbage collector's object lists, or imports a module outside ``IMPORTS``; no thread starts,
  and a thread or process alive after the call that was not before fails the check. Triton's own code
  (its interpreter and the GPU compiler's front end) may compile the kernel's source: allowed by where the
  call comes from, Triton's code objects, never a learner's.
- A learner who removes the check's instruments (pops the dispatch or function mode, replaces the tracer)
  fails the check: the sandbox restores them and the verdict says so.
- Lesson 09's exercises (``KERNEL_EXERCISES``) pass only when a Triton launch did the arithmetic: outside
  launches torch may only allocate, view, copy and read metadata (``KERNEL_ALLOWED``), inside them it may
  not run at all (but for Triton's own copies), every input is read by a launch, every returned tensor is
  written by one, no launched kernel is one a GPU's compiler refuses.

- What an earlier cell left running beside the check fails it too (LEFT_RUNNING, leftovers.py): a thread
  running the notebook's code (in the grader's kernel: any thread the kernel did not start), a torch mode
  under the check's, torch functions switched off, the Python dispatch keys excluded. Those stand outside
  everything above (the guard and the tracer watch the check's thread, torch's mode stacks are per thread).
- Code of the learner's that torch calls back while the check computes gradients (a custom autograd
  Function's backward, a tensor hook) runs under the same rules as the function itself.

What this does not stop: a learner who rewrites this package in their own process. The grader
adds what the check cannot: its static scan of every cell (an allow-list of callables) and a sandbox per
submission; what its kernel reports back is plain data checked against these tables (wire.py).
"""

# ----------------------------------------------------------------------------- forbidden computations

#: The aten operations that *are* each forbidden computation (overload packets, as the dispatcher names them).
SOFTMAX = ("_softmax", "_safe_softmax", "_log_softmax", "_masked_softmax", "special_softmax", "special_log_softmax")
LOGSUMEXP = ("logsumexp", "special_logsumexp")
FUSED_ATTENTION = (
    "scaled_dot_product_attention", "_scaled_dot_product_attention_math", "_scaled_dot_product_flash_attention",
    "_scaled_dot_product_flash_attention_for_cpu", "_scaled_dot_product_efficient_attention",
    "_scaled_dot_product_cudnn_attention", "_scaled_dot_product_fused_attention_overrideable",
    "_flash_attention_forward", "_efficient_attention_forward", "_native_multi_head_attention",
    "_transformer_encoder_layer_fwd",
)

#: Exercise -> the computations its text forbids (its names list says the same, by name).
FORBIDDEN_OPERATIONS = {
    "01.scaled_dot": FUSED_ATTENTION,
    "01.softmax": SOFTMAX + FUSED_ATTENTION,
    "07.gqa_attention": FUSED_ATTENTION,
    "08.tiled_forward": SOFTMAX + LOGSUMEXP + FUSED_ATTENTION,
    "08.causal_tiles": SOFTMAX + LOGSUMEXP + FUSED_ATTENTION,
    "08.tiled_backward": SOFTMAX + LOGSUMEXP + FUSED_ATTENTION,
    "09.softmax_kernel": SOFTMAX + LOGSUMEXP + FUSED_ATTENTION,
    "09.softmax_blocks": SOFTMAX + LOGSUMEXP + FUSED_ATTENTION,
    "09.flash_forward": SOFTMAX + LOGSUMEXP + FUSED_ATTENTION,
    "09.causal_forward": SOFTMAX + LOGSUMEXP + FUSED_ATTENTION,
    "09.backward_dkdv": SOFTMAX + LOGSUMEXP + FUSED_ATTENTION,
    "09.backward_dq": SOFTMAX + LOGSUMEXP + FUSED_ATTENTION,
    "09.flash_function": SOFTMAX + LOGSUMEXP + FUSED_ATTENTION,
    "09.flash_forward_half": SOFTMAX + LOGSUMEXP + FUSED_ATTENTION,
    # lesson 10: the block's attention is the learner's (lesson 01's scaled_dot_product_attention may compute it)
    "10.causal_block": FUSED_ATTENTION,
}

# ----------------------------------------------------------------------------- functions that solve an exercise

#: The course's attention, in every form it hands out: each solves an exercise that asks for attention.
_ATTENTION = (
    "course_utils.attention.scaled_dot_product_attention", "course_utils.tiled.tiled_attention",
    "course_utils.tiled.flash_attention", "course_utils.tiled.materialised_attention",
    "course_utils.decoding.gqa_attention",
)
_TRITON_ATTENTION = ("course_utils.flash_triton.flash_forward", "course_utils.flash_triton.flash_attention")
_SOFTMAXES = ("course_utils.tiled.online_softmax", "course_utils.masks.masked_softmax")

#: Exercise -> the functions (course and torch, by full name) that compute its answer, beyond those its
#: forbidden names already list: recognised on the stack, by code, whatever name called them.
SOLVERS = {
    "01.scaled_dot": _ATTENTION,
    "01.softmax": _SOFTMAXES + _ATTENTION,
    "04.fused_forward": ("torch.nn.functional.multi_head_attention_forward",),
    "07.gqa_attention": _ATTENTION,
    "08.tiled_forward": _ATTENTION,
    "08.causal_tiles": _ATTENTION,
    "08.tiled_backward": _ATTENTION + ("course_utils.tiled.tiled_backward",),
    "09.softmax_kernel": _SOFTMAXES + _ATTENTION + _TRITON_ATTENTION + ("course_utils.flash_triton.softmax_rows",),
    "09.softmax_blocks": _SOFTMAXES + _ATTENTION + _TRITON_ATTENTION + ("course_utils.flash_triton.softmax_rows",),
    "09.flash_forward": _ATTENTION + _TRITON_ATTENTION,
    "09.causal_forward": _ATTENTION + _TRITON_ATTENTION,
    "09.backward_dkdv": _ATTENTION + _TRITON_ATTENTION + (
        "course_utils.flash_triton.flash_backward", "course_utils.tiled.tiled_backward"),
    "09.backward_dq": _ATTENTION + _TRITON_ATTENTION + (
        "course_utils.flash_triton.flash_backward", "course_utils.tiled.tiled_backward"),
    "09.flash_function": _ATTENTION + _TRITON_ATTENTION + (
        "course_utils.flash_triton.flash_backward", "course_utils.tiled.tiled_backward"),
    "09.flash_forward_half": _ATTENTION + _TRITON_ATTENTION,
    # lesson 10: the course's GPT already does each exercise's work
    "10.causal_block": ("course_utils.gpt.Block.forward", "course_utils.gpt.CausalSelfAttention.forward",
                        "course_utils.gpt.causal_attention", "course_utils.gpt._attend", "course_utils.gpt.GPT.forward",
                        "course_utils.multihead.FusedMultiheadAttention.forward",
                        "course_utils.multihead.NaiveMultiheadAttention.forward",
                        "torch.nn.functional.multi_head_attention_forward"),
    "10.sample_next": ("course_utils.gpt.sample_next", "course_utils.gpt._draw", "course_utils.gpt.GPT.generate"),
    "10.generate_cached": ("course_utils.gpt.GPT.generate",),
}

#: Exercises that ask for a course function written again by the learner (their forbidden names are exactly the
#: course's own): no course code at all may run while the learner's function runs. A course function entered from
#: outside the course (the learner's code, torch calling a module's forward) is SOLVER, named by its module and
#: qualified name, recognised by the module its code belongs to: another course function that computes the same
#: answer under another name (``tiled.keep_of(L_q, L_k, causal=True)`` is a causal mask) is refused without being
#: listed. (The check's own modules, ``course_utils.exercises``, are no course code here.)
OWN_CODE = frozenset((
    "00.split_heads", "00.merge_heads", "00.padding_mask", "01.scaled_dot", "01.softmax", "01.additive_scores",
    "02.causal_mask", "02.masked_softmax", "06.sinusoidal_encoding", "06.offset_rotation", "07.apply_rope",
    "08.merge_states",
))
#: The course's package, whose functions OWN_CODE refuses, and its modules that are the check's instruments.
COURSE_PACKAGE, INSTRUMENT_PACKAGE = "course_utils", "course_utils.exercises"

# ----------------------------------------------------------------------------- lesson 09: the kernel is the answer

#: Lesson 09's exercises (a new one is added here, and its text says that the kernel computes the answer).
KERNEL_EXERCISES = ("09.softmax_kernel", "09.softmax_blocks", "09.matmul_kernel", "09.flash_forward",
                    "09.causal_forward", "09.backward_dkdv", "09.backward_dq", "09.flash_function",
                    "09.flash_forward_half")

#: Exercise -> (the argument whose rows the kernels walk, the argument that bounds how much of a row one load may
#: take): a kernel that loads more of one row at once ignored the block it was given (BLOCK_IGNORED), however right
#: its values. Measured by the interpreter's bounds layer on every load (course_utils.triton_bounds); a GPU's
#: compiled launch does not say, and is not judged on it.
LOAD_WIDTH = {"09.softmax_blocks": (0, 1)}

#: What torch may do outside a launch in a kernel exercise: allocate, view, copy, convert, read metadata.
KERNEL_ALLOWED = frozenset((
    # allocation
    "empty", "empty_like", "empty_strided", "new_empty", "new_empty_strided", "zeros", "zeros_like", "new_zeros",
    "full", "full_like", "new_full", "ones", "ones_like", "new_ones", "scalar_tensor", "fill_", "zero_",
    # views and metadata
    "view", "_unsafe_view", "reshape", "as_strided", "expand", "squeeze", "unsqueeze", "flatten", "unflatten",
    "select", "slice", "narrow", "split", "unbind", "chunk", "transpose", "permute", "t", "alias", "detach",
    "view_as", "expand_as", "contiguous", "stride", "size", "sym_size", "sym_stride", "sym_numel", "numel", "dim",
    "is_contiguous", "sym_storage_offset", "_local_scalar_dense",
    # copies and conversions of data that is already there (its origin is followed: kernels.py)
    "clone", "copy_", "_to_copy", "to", "lift_fresh", "_copy_from", "_copy_from_and_resize",
))
#: The copies among them: their sources must be data the call can account for (an input, an allocation, a launch's).
KERNEL_COPIES = frozenset(("clone", "copy_", "_to_copy", "to", "_copy_from", "_copy_from_and_resize"))
#: Tensors made from data outside torch (``torch.tensor(...)``, ``torch.from_numpy``): allowed, but never data the
#: call can account for.
KERNEL_FOREIGN = frozenset(("lift_fresh",))

# ----------------------------------------------------------------------------- one thread, no evaluators

#: Audit events refused while the learner's function runs (unless Triton's own code raised them), by prefix.
REFUSED_EVENTS = (
    ("compile", "EVALUATOR"),  # text or a syntax tree made into code: eval, exec, compile, and every parser on them
    ("code.__new__", "EVALUATOR"), ("function.__new__", "EVALUATOR"), ("marshal.load", "EVALUATOR"),
    ("os.system", "PROCESS"), ("os.exec", "PROCESS"), ("os.posix_spawn", "PROCESS"), ("os.spawn", "PROCESS"),
    ("os.fork", "PROCESS"), ("os.forkpty", "PROCESS"), ("subprocess.Popen", "PROCESS"), ("pty.spawn", "PROCESS"),
    ("os.startfile", "PROCESS"), ("os.kill", "PROCESS"), ("os.killpg", "PROCESS"), ("webbrowser.open", "PROCESS"),
    ("ctypes.", "NATIVE"), ("socket.", "SOCKET"),
    ("sys.settrace", "UNWATCHED"), ("sys.setprofile", "UNWATCHED"), ("sys.addaudithook", "UNWATCHED"),
    ("gc.get_referrers", "UNWATCHED"), ("gc.get_referents", "UNWATCHED"), ("gc.get_objects", "UNWATCHED"),
    ("import", "IMPORT"),  # of a module outside IMPORTS, loaded for the first time during the call
)

#: Modules a learner's function may load for the first time while it runs (and their submodules).
IMPORTS = frozenset((
    "torch", "numpy", "triton", "course_utils", "math", "cmath", "numbers", "fractions", "decimal", "statistics",
    "functools", "itertools", "operator", "collections", "dataclasses", "typing", "enum", "abc", "copy",
    "contextlib", "warnings", "string", "re", "bisect", "heapq", "random",
))

# ----------------------------------------------------------------------------- nothing left running beside a check

#: Forbidden names the check's own gradient pass calls (grading.gradients): not watched while it runs.
GRADIENT_PASS_NAMES = ("torch.autograd.grad", "torch.autograd.backward", "Tensor.backward")

#: The refusal of what an earlier cell left running beside the check (leftovers.py), and its details.
LEFT_RUNNING = "LEFT_RUNNING"
LEFT_RUNNING_DETAILS = ("thread", "function_mode", "dispatch_mode", "torch_function", "dispatch_keys")
#: The dispatch keys through which the check's dispatch mode sees every operation: excluded, it sees nothing.
WATCH_KEYS = ("Python", "PythonTLSSnapshot", "PreDispatch", "PythonDispatcher")
#: Torch modes a notebook may hold while a check runs (by class): the default device's (torch.set_default_device),
#: and the check's own instruments (a mode handler the time limit interrupted pushes one back when it is collected).
BENIGN_MODES = frozenset(("torch.utils._device.DeviceContext", "course_utils.exercises.sandbox._Watch",
                          "course_utils.exercises.observe.Observer"))
#: Threads a library an exercise cell may use starts by itself and that run only its code: tqdm's monitor.
BENIGN_THREADS = frozenset(("tqdm._monitor.TMonitor",))

#: The refusals a check can report, in the order the judge puts them first; each has a message
#: "check.refused.<code>" (i18n.py). EVALUATOR ... UNWATCHED: the call did something no answer does.
REFUSAL_CODES = ("EVALUATOR", "PROCESS", "NATIVE", "SOCKET", "THREAD", "IMPORT", "UNWATCHED", "LEFT_RUNNING",
                 "OPERATION", "SOLVER",
                 "TORCH_OUTSIDE_KERNEL", "TORCH_IN_KERNEL", "FOREIGN_DATA", "DATA_IN_ARGUMENTS", "NO_LAUNCH",
                 "COMPILER_REFUSED", "INPUT_NOT_READ", "OUTPUT_NOT_WRITTEN", "BLOCK_IGNORED")
#: Those the judge reads only once the values are right: a wrong answer's own mistake is named first (a plain
#: torch answer with a known mistake learns its mistake; once right, it learns that the kernel must compute it).
AFTER_VALUES = ("NO_LAUNCH", "TORCH_IN_KERNEL", "TORCH_OUTSIDE_KERNEL", "FOREIGN_DATA", "DATA_IN_ARGUMENTS",
                "COMPILER_REFUSED", "INPUT_NOT_READ", "OUTPUT_NOT_WRITTEN", "BLOCK_IGNORED")


def forbidden_operations(exercise):
    """The aten operation names `exercise` refuses while the learner's function runs."""
    return FORBIDDEN_OPERATIONS.get(exercise, ())


def solvers(exercise):
    """The full names of the functions that compute `exercise`'s answer (besides its forbidden names)."""
    return SOLVERS.get(exercise, ())


def own_code(exercise):
    """Whether no course function may run while `exercise`'s function runs (OWN_CODE)."""
    return exercise in OWN_CODE


def course_module(module):
    """Whether the module named `module` is the course's code (not the check's instruments)."""
    return type(module) is str and (module == COURSE_PACKAGE or module.startswith(COURSE_PACKAGE + ".")) and not (
        module == INSTRUMENT_PACKAGE or module.startswith(INSTRUMENT_PACKAGE + "."))


def load_width(exercise):
    """(position of the argument whose rows are walked, position of the bound on one load's width) or None."""
    return LOAD_WIDTH.get(exercise)


def is_kernel(exercise):
    """Whether `exercise`'s answer must be computed by Triton kernels."""
    return exercise in KERNEL_EXERCISES


def event_code(event):
    """The refusal code of an audit event, or None when the policy lets it through."""
    for prefix, code in REFUSED_EVENTS:
        if event == prefix or (prefix.endswith(".") and event.startswith(prefix)) or \
                (prefix in ("os.exec", "os.spawn", "marshal.load") and event.startswith(prefix)):
            return code
    return None


def importable(module):
    """Whether the learner's function may load `module` (a dotted name) during the call."""
    return module.partition(".")[0] in IMPORTS
