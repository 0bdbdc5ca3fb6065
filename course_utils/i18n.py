"""The message catalogue: every sentence the package says to a learner, in English and Chinese.

A notebook picks its language once, through ``course_utils.setup(lang=...)``; everything the
package prints afterwards (check verdicts, error messages, widget labels) follows it.
"""

LANGUAGES = ("en", "zh")

_current = "en"

MESSAGES = {
    # check verdicts. Their marks (✔ ✘ ○ ⚠) are text symbols every common font draws; emoji
    # (✅ ❌ ⏳ 💥) came out as empty boxes on a machine without an emoji font.
    "check.passed": {
        "en": "✔ {exercise}: passed on {cases} test cases.",
        "zh": "✔ {exercise}：{cases} 组测试全部通过。",
    },
    "check.mistake": {
        "en": "✘ {exercise}: not yet. Diagnosis: {code}. {hint}",
        "zh": "✘ {exercise}：还不对。{hint}（错误代号 {code}）",
    },
    "check.mismatch": {
        "en": "✘ {exercise}: not yet. {detail}",
        "zh": "✘ {exercise}：还不对。{detail}",
    },
    "check.case": {
        "en": "Case {case} ({args}): {detail}",
        "zh": "第 {case} 组测试（{args}）：{detail}",
    },
    "check.not_attempted": {
        "en": "○ {exercise}: not attempted yet. Replace the `raise NotImplementedError` with your code.",
        "zh": "○ {exercise}：尚未作答。请把 `raise NotImplementedError` 换成你的代码。",
    },
    "check.incomplete": {
        "en": "⚠ {exercise}: incomplete. Your function raised NotImplementedError on test case {case} ({args}) "
        "but ran on other cases: finish the part that raises it.",
        "zh": "⚠ {exercise}：还没写完。你的函数在第 {case} 组测试（{args}）中抛出了 NotImplementedError，"
        "在其他测试中却能运行：请补全抛出它的那部分代码。",
    },
    "check.crashed": {
        "en": "⚠ {exercise}: your function raised {error} on test case {case} ({args}): {text}",
        "zh": "⚠ {exercise}：你的函数在第 {case} 组测试（{args}）中抛出了 {error}：{text}",
    },
    "check.exit": {
        "en": "⚠ {exercise}: your function called sys.exit() (or exit()) on test case {case} ({args}); "
        "a checked function must return its result instead.",
        "zh": "⚠ {exercise}：你的函数在第 {case} 组测试（{args}）中调用了 sys.exit()（或 exit()）；"
        "被检查的函数应当返回结果，而不是退出。",
    },
    "check.time_limit": {
        "en": "⏱️ {exercise}: your function ran for more than {seconds:g} s on test case {case} ({args}) and was "
        "stopped. Is there a loop that never ends?",
        "zh": "⏱️ {exercise}：你的函数在第 {case} 组测试（{args}）中运行超过 {seconds:g} 秒，已被中止。"
        "是不是有循环停不下来？",
    },
    "check.forbidden": {
        "en": "✘ {exercise}: your function calls {names}, which this exercise asks you not to use: "
        "write that step yourself.",
        "zh": "✘ {exercise}：你的函数调用了 {names}，而本练习要求不用它：请自己写出这一步。",
    },
    # what a check refuses at run time, below the names (course_utils/exercises/rules.py: the policy)
    "check.refused.EVALUATOR": {
        "en": "✘ {exercise}: while the check ran it, your function turned text into code ({detail}: eval, exec, "
        "compile or a library that parses text into Python). An answer computes its result with the code you "
        "wrote in the cell.",
        "zh": "✘ {exercise}：检查运行你的函数时，它把文本变成了代码（{detail}：eval、exec、compile，或把文本解析成 "
        "Python 的库）。答案应当用你在单元格里写的代码算出结果。",
    },
    "check.refused.PROCESS": {
        "en": "✘ {exercise}: while the check ran it, your function started a process ({detail}). An answer runs in "
        "the notebook's own process.",
        "zh": "✘ {exercise}：检查运行你的函数时，它启动了一个进程（{detail}）。答案只在笔记本自己的进程里运行。",
    },
    "check.refused.NATIVE": {
        "en": "✘ {exercise}: while the check ran it, your function used ctypes ({detail}) to reach C code directly. "
        "Write the answer with torch.",
        "zh": "✘ {exercise}：检查运行你的函数时，它用 ctypes（{detail}）直接调用了 C 代码。请用 torch 写出答案。",
    },
    "check.refused.SOCKET": {
        "en": "✘ {exercise}: while the check ran it, your function opened a network socket ({detail}). An answer "
        "needs no network.",
        "zh": "✘ {exercise}：检查运行你的函数时，它打开了网络套接字（{detail}）。答案不需要网络。",
    },
    "check.refused.THREAD": {
        "en": "✘ {exercise}: your function started a thread or left one running (threads, executors and "
        "DataLoader workers alike). A check runs your function in one thread, where it sees what the function "
        "does: compute the result in the function itself.",
        "zh": "✘ {exercise}：你的函数启动了线程，或留下了仍在运行的线程（线程、执行器和 DataLoader 的工作进程都算）。"
        "检查在一个线程里运行你的函数，才能看到它做了什么：请在函数本身里算出结果。",
    },
    "check.refused.IMPORT": {
        "en": "✘ {exercise}: while the check ran it, your function imported a module an answer does not need "
        "(torch, math, numpy and the course's modules are the ones it may load). Import what you need at the "
        "top of the cell, from those.",
        "zh": "✘ {exercise}：检查运行你的函数时，它导入了答案用不到的模块（能加载的是 torch、math、numpy 和课程自己的"
        "模块）。请在单元格开头从这些模块里导入需要的东西。",
    },
    "check.refused.UNWATCHED": {
        "en": "✘ {exercise}: your function switched off what the check watches it with ({detail}: the tracer, "
        "torch's function or dispatch modes, the audit hooks or the garbage collector's lists). The check has put "
        "them back; an answer leaves them alone.",
        "zh": "✘ {exercise}：你的函数关掉了检查用来观察它的工具（{detail}：跟踪函数、torch 的函数模式或分派模式、"
        "审计钩子，或垃圾回收器的对象列表）。检查已经把它们恢复；答案不应碰它们。",
    },
    # (grader branch) what an earlier cell left running beside a check (course_utils/exercises/leftovers.py)
    "check.refused.LEFT_RUNNING": {
        "en": "✘ {exercise}: before the check called your function, code of an earlier cell left something running "
        "beside it ({detail}: a thread, a torch mode, torch functions or dispatch keys switched off), out of the "
        "check's sight. Restart the kernel and run the cells again without it: an answer needs nothing beside it.",
        "zh": "✘ {exercise}：检查调用你的函数之前，前面某个单元格的代码在它旁边留下了仍在运行的东西（{detail}：线程、"
        "torch 的模式，或被关掉的 torch 函数钩子、分派键），检查看不到它们。请重启内核，去掉这段代码后重新运行各单元格："
        "答案不需要旁边的任何东西。",
    },
    "check.refused.OPERATION": {
        "en": "✘ {exercise}: your function ran {detail}, an operation this exercise asks you to write yourself "
        "(whatever name reached it: torch.special, F.scaled_dot_product_attention, nn.MultiheadAttention and "
        "aliases all end there). Write that step with elementary operations.",
        "zh": "✘ {exercise}：你的函数执行了 {detail}，而本练习要求你自己写出这一步（不论用什么名字调用：torch.special、"
        "F.scaled_dot_product_attention、nn.MultiheadAttention 以及各种别名，最后都会执行它）。请用基本运算写出这一步。",
    },
    "check.refused.SOLVER": {
        "en": "✘ {exercise}: your function ran {detail} (recognised by its code, whatever name called it), which "
        "computes this exercise's answer for you. Write it yourself.",
        "zh": "✘ {exercise}：你的函数运行了 {detail}（按代码本身识别，不管用什么名字调用），它会替你算出本练习的答案。"
        "请自己写。",
    },
    "check.refused.NO_LAUNCH": {
        "en": "✘ {exercise}: your function launched no Triton kernel. In this lesson the kernel is the answer: "
        "launch your @triton.jit kernel with `kernel[grid](...)` and let it compute the result.",
        "zh": "✘ {exercise}：你的函数没有启动任何 Triton 核函数。本课的答案就是核函数：用 `kernel[grid](...)` 启动你的 "
        "@triton.jit 核函数，让它算出结果。",
    },
    "check.refused.TORCH_IN_KERNEL": {
        "en": "✘ {exercise}: your kernel's body called torch ({detail} ran inside the launch). A kernel computes "
        "with triton.language on the blocks it loads; a GPU compiler refuses torch there.",
        "zh": "✘ {exercise}：你的核函数体调用了 torch（{detail} 在启动的核函数里运行）。核函数要用 triton.language "
        "对它加载的块进行计算；GPU 的编译器不接受在那里调用 torch。",
    },
    "check.refused.TORCH_OUTSIDE_KERNEL": {
        "en": "✘ {exercise}: your function computed with torch outside a kernel: {detail} ran outside every launch. "
        "Outside the kernel, torch may only allocate (torch.empty, torch.full ...), view, copy and read shapes; "
        "the arithmetic belongs in the kernel.",
        "zh": "✘ {exercise}：你的函数在核函数之外用 torch 做了计算：{detail} 在所有核函数启动之外运行。在核函数之外，"
        "torch 只能分配张量（torch.empty、torch.full……）、取视图、复制和读取形状；运算应当放在核函数里。",
    },
    "check.refused.FOREIGN_DATA": {
        "en": "✘ {exercise}: your function brought in data the check cannot trace to its inputs ({detail}: a tensor "
        "made outside torch, with NumPy say, copied in or handed to a kernel). Compute the result in the kernel, "
        "from the inputs.",
        "zh": "✘ {exercise}：你的函数引入了检查无法追溯到输入的数据（{detail}：在 torch 之外构造的张量，比如用 NumPy "
        "算的，被复制进来或交给了核函数）。请在核函数里从输入算出结果。",
    },
    "check.refused.COMPILER_REFUSED": {
        "en": "✘ {exercise}: a kernel your function launched runs in Triton's interpreter but a GPU's compiler "
        "refuses it (`break`, `continue`, a `return` in the middle ...). {detail}",
        "zh": "✘ {exercise}：你的函数启动的核函数能在 Triton 的解释器里运行，但 GPU 的编译器不接受它（`break`、"
        "`continue`、中途的 `return`……）。{detail}",
    },
    "check.refused.INPUT_NOT_READ": {
        "en": "✘ {exercise}: the values are right, but no kernel your function launched read one of its inputs: the "
        "result was not computed by the kernels from the inputs. Pass the inputs to the kernel and load them there.",
        "zh": "✘ {exercise}：数值正确，但你的函数启动的核函数都没有读取某个输入：结果不是核函数从输入算出来的。"
        "请把输入传给核函数，并在核函数里加载它们。",
    },
    "check.refused.OUTPUT_NOT_WRITTEN": {
        "en": "✘ {exercise}: the values are right, but a tensor your function returned was not written by any "
        "kernel it launched: allocate the output (torch.empty), have the kernel store into it, and return it.",
        "zh": "✘ {exercise}：数值正确，但你的函数返回的某个张量不是它启动的核函数写入的：请先分配输出（torch.empty），"
        "让核函数把结果存进去，再返回它。",
    },
    "check.refused.BLOCK_IGNORED": {
        "en": "✘ {exercise}: the values are right, but a kernel your function launched loaded more than `block` "
        "columns of one row of x at once: the block you were given was ignored (a block of next_power_of_2(n) holds "
        "the whole row, which no program's registers hold once a row is 100,000 long). Walk the row in blocks of "
        "`block` columns: BLOCK = block, `columns = start + tl.arange(0, BLOCK)` in a loop over the starts.",
        "zh": "✘ {exercise}：数值正确，但你的函数启动的核函数一次读取了 x 的一行里多于 `block` 列：给你的块大小被忽略了"
        "（next_power_of_2(n) 大小的块装下了整行，而一行长到 100,000 时，没有哪个程序的寄存器装得下）。"
        "请按每块 `block` 列走过这一行：BLOCK = block，在对起点的循环里用 `columns = start + tl.arange(0, BLOCK)`。",
    },
    # (redteam branch) lesson 09: what a call did besides its kernels' loads depends on the input values
    # (course_utils/exercises/kernels.py, DATA_IN_ARGUMENTS); {detail} is one of the check.data.* texts below
    "check.refused.DATA_IN_ARGUMENTS": {
        "en": "✘ {exercise}: what your function does besides its kernels' loads depends on the input values: called "
        "again on inputs of the same shapes, dtypes and strides but other values, {detail} differed. A launch's "
        "grid, its scalar arguments, the tensors it is given (and where in them) and any value torch fills in "
        "follow from the shapes alone; the values reach the answer only through what the kernel loads from the "
        "inputs. An answer computed on the host (NumPy, `.item()`) and passed to a kernel is no kernel's answer: "
        "compute the result in the kernel.",
        "zh": "✘ {exercise}：你的函数在核函数加载数据之外所做的事取决于输入的数值：换一组形状、数据类型和步长都相同、"
        "数值不同的输入再调用一次，{detail}就不一样了。一次启动的网格、标量参数、交给它的张量（以及在张量中的位置），"
        "还有 torch 填入的任何值，都只应由形状决定；数值只能通过核函数从输入加载的数据影响答案。在主机上算好"
        "（用 NumPy、`.item()`）再交给核函数的答案不是核函数算出的答案：请在核函数里算出结果。",
    },
    "check.data.launch": {"en": "launch {n}", "zh": "第 {n} 次启动"},
    "check.data.launch_kernel": {"en": "the kernel of launch {n}", "zh": "第 {n} 次启动的核函数"},
    "check.data.launch_missing": {"en": "launch {n} (made by one call only)", "zh": "第 {n} 次启动（只有一次调用有它）"},
    "check.data.launch_grid": {"en": "the grid of launch {n}", "zh": "第 {n} 次启动的网格"},
    "check.data.launch_argument": {"en": "argument `{name}` of launch {n}", "zh": "第 {n} 次启动的参数 `{name}`"},
    "check.data.launch_argument_any": {"en": "an argument of launch {n}", "zh": "第 {n} 次启动的某个参数"},
    "check.data.launch_global": {
        "en": "`{name}`, which the kernel of launch {n} reads besides its arguments",
        "zh": "第 {n} 次启动的核函数在参数之外读取的 `{name}`",
    },
    "check.data.launch_global_any": {
        "en": "a value the kernel of launch {n} reads besides its arguments",
        "zh": "第 {n} 次启动的核函数在参数之外读取的某个值",
    },
    "check.data.operation": {
        "en": "the arguments of {operation}, torch's operation {n} outside the launches",
        "zh": "核函数启动之外的第 {n} 个 torch 运算 {operation} 的参数",
    },
    "check.data.operation_any": {
        "en": "torch's operation {n} outside the launches", "zh": "核函数启动之外的第 {n} 个 torch 运算",
    },
    "check.data.operation_missing": {
        "en": "torch's operation {n} outside the launches (another operation, or one call only)",
        "zh": "核函数启动之外的第 {n} 个 torch 运算（运算不同，或者只有一次调用有它）",
    },
    "check.data.raised": {
        "en": "the call itself (with the other values your function raised an error)",
        "zh": "调用本身（换成另一组数值后，你的函数抛出了错误）",
    },
    "check.data.unknown": {"en": "what it launched", "zh": "它启动的内容"},
    "check.too_large": {
        "en": "✘ {exercise}: the values and gradients are right, but on test case {case} ({args}) your function made "
        "a tensor of {size:,} elements, and this exercise allows at most {limit:,} at a time (the exercise's text "
        "says what may be held at once). Work block by block and keep only what the text allows.",
        "zh": "✘ {exercise}：数值和梯度都对，但在第 {case} 组测试（{args}）中，你的函数构造了一个有 {size:,} 个元素的张量，"
        "而本练习任何时候最多允许 {limit:,} 个（练习说明写了同一时刻能保存什么）。请一块一块地计算，只保留说明允许的部分。",
    },
    # lesson 10's exercises judged by what their calls did (course_utils/exercises/objects.py)
    "ex10.fed_too_many": {
        "en": "the model read {fed} positions in all, and greedy generation with a KV cache needs {needed} here: the "
        "prompt (or the window's text) once, then one new token a step, and the window's last context // 2 tokens "
        "again each time the window jumps. Recomputing the window at every step gives the right tokens, slowly",
        "zh": "模型一共读入了 {fed} 个位置，而这里用 KV 缓存做贪心生成只需要 {needed} 个：提示（或窗口内的文本）读入一次，"
        "之后每步只读一个新词元，窗口每跳一次再读入窗口最后 context // 2 个词元。每一步都重新计算整个窗口，"
        "得到的词元虽然对，却很慢",
    },
    "check.input_modified": {
        "en": "✘ {exercise}: on test case {case} ({args}) your function changed its argument `{name}` in place: "
        "a function must not change what it is given. Work on a copy, e.g. `{copy}`, or use the out-of-place "
        "form (`masked_fill` rather than `masked_fill_`, `x = x + 1` rather than `x += 1`).",
        "zh": "✘ {exercise}：在第 {case} 组测试（{args}）中，你的函数原地修改了参数 `{name}`：函数不能改动传给它的参数。"
        "请在副本上操作，例如 `{copy}`，或者改用非原地的写法（用 `masked_fill` 而不是 `masked_fill_`，"
        "用 `x = x + 1` 而不是 `x += 1`）。",
    },
    "check.no_graph": {
        "en": "✘ {exercise}: the values are right, but on test case {case} ({args}) {where} is cut off from the "
        "computation graph, so no gradient flows back through it (a model built on it would not learn). Was it "
        "computed under torch.no_grad(), with .detach() or .data, or rebuilt from plain numbers "
        "(.item(), .tolist(), torch.tensor(...))?",
        "zh": "✘ {exercise}：数值都对，但在第 {case} 组测试（{args}）中，{where}脱离了计算图，梯度无法沿它传回"
        "（用它搭起来的模型学不到东西）。它是不是在 torch.no_grad() 下算的、用了 .detach() 或 .data，"
        "或者是由普通数值（.item()、.tolist()、torch.tensor(...)）重新构造的？",
    },
    "check.gradient": {
        "en": "✘ {exercise}: the values are right, but on test case {case} ({args}) the gradient with respect to "
        "'{name}' differs from the reference's by up to {diff:.3g}, at index {index} (yours {got:.4g}, expected "
        "{expected:.4g}). Some step changes how gradients flow back: an edit through .data, a value taken out "
        "of the graph, a custom backward.",
        "zh": "✘ {exercise}：数值都对，但在第 {case} 组测试（{args}）中，对 {name} 的梯度与参考答案最多相差 "
        "{diff:.3g}，位于索引 {index}（你的值 {got:.4g}，应为 {expected:.4g}）。某一步改变了梯度的回传，"
        "例如通过 .data 修改了数值、把某个值移出了计算图，或自定义了 backward。",
    },
    "check.gradient_hidden": {
        "en": "✘ {exercise}: the values are right, but on test case {case} ({args}) the gradient with respect to "
        "'{name}' differs from the reference's.",
        "zh": "✘ {exercise}：数值都对，但在第 {case} 组测试（{args}）中，对 '{name}' 的梯度与参考实现不一致。",
    },
    "check.hidden_case": {"en": "one of the grader's own cases: its inputs are not shown",
                          "zh": "评分程序自己的测试，不显示其输入"},
    "check.hidden_detail": {"en": "the result differs (where, and by how much, is not shown for the grader's own cases)",
                            "zh": "结果不一致（评分程序自己的测试不显示差在哪里、差多少）"},
    "check.hidden_text": {"en": "(its message is not shown for the grader's own cases)",
                          "zh": "（评分程序自己的测试不显示报错信息）"},
    "check.gradient_nan": {
        "en": "✘ {exercise}: the values are right, but on test case {case} ({args}) the gradient with respect to "
        "'{name}' is NaN at index {index}, where the reference's is a number. A step whose value looks fine can "
        "still give NaN on the way back (a softmax over a row of -inf whose NaN is hidden afterwards, say).",
        "zh": "✘ {exercise}：数值都对，但在第 {case} 组测试（{args}）中，对 {name} 的梯度在索引 {index} 处是 NaN，"
        "而参考答案在该处是正常数值。前向结果看起来没问题的一步，反向时仍可能产生 NaN"
        "（例如先对全是 -inf 的一行做 softmax，再把得到的 NaN 遮掉）。",
    },
    "check.backward_failed": {
        "en": "✘ {exercise}: the values are right, but on test case {case} ({args}) gradients cannot flow back "
        "through your function: autograd raised {error}: {text}",
        "zh": "✘ {exercise}：数值都对，但在第 {case} 组测试（{args}）中，梯度无法沿你的函数反向传回："
        "autograd 抛出了 {error}：{text}",
    },
    "check.hint_T": {
        "en": "Hint: your function used `.T` on a tensor with more than 2 axes, which reverses all of its axes; "
        "to swap only the last two, use `.transpose(-2, -1)` or `.mT`.",
        "zh": "提示：你的函数对超过 2 维的张量用了 `.T`，它会把所有维度的顺序整个反过来；"
        "只想交换最后两维，请用 `.transpose(-2, -1)` 或 `.mT`。",
    },
    "check.world_changed": {
        "en": "Note: your function changed {what}; the check has put everything back as it was.",
        "zh": "注意：你的函数改动了 {what}；检查已把它们全部恢复原状。",
    },
    "check.output_cut": {
        "en": "… (your function printed more; the check cut the rest)",
        "zh": "……（你的函数还打印了更多内容，检查已截去其余部分）",
    },
    "check.list_separator": {"en": ", ", "zh": "、"},
    "check.change.replaced": {"en": "{name} (replaced)", "zh": "{name}（被替换）"},
    "check.change.added": {"en": "{name} (added)", "zh": "{name}（新增）"},
    "check.change.deleted": {"en": "{name} (deleted)", "zh": "{name}（被删除）"},
    "check.setting.default_dtype": {
        "en": "the default dtype (torch.set_default_dtype)",
        "zh": "默认 dtype（torch.set_default_dtype）",
    },
    "check.setting.grad_mode": {"en": "grad mode (torch.set_grad_enabled)", "zh": "梯度模式（torch.set_grad_enabled）"},
    "check.setting.inference_mode": {"en": "inference mode (torch.inference_mode)", "zh": "推理模式（torch.inference_mode）"},
    "check.setting.deterministic": {
        "en": "deterministic algorithms (torch.use_deterministic_algorithms)",
        "zh": "确定性算法设置（torch.use_deterministic_algorithms）",
    },
    "check.setting.anomaly": {
        "en": "anomaly detection (torch.autograd.set_detect_anomaly)",
        "zh": "异常检测（torch.autograd.set_detect_anomaly）",
    },
    "check.setting.default_device": {
        "en": "the default device (torch.set_default_device)",
        "zh": "默认设备（torch.set_default_device）",
    },
    "check.setting.function_modes": {
        "en": "torch's function modes (a TorchFunctionMode left active)",
        "zh": "torch 的函数模式栈（有 TorchFunctionMode 没有退出）",
    },
    "check.setting.dispatch_modes": {
        "en": "torch's dispatch modes (a TorchDispatchMode left active)",
        "zh": "torch 的分派模式栈（有 TorchDispatchMode 没有退出）",
    },
    "check.setting.threads": {"en": "the number of threads (torch.set_num_threads)", "zh": "线程数（torch.set_num_threads）"},
    "check.setting.print_options": {
        "en": "torch's print options (torch.set_printoptions)",
        "zh": "torch 的打印选项（torch.set_printoptions）",
    },
    "check.setting.warn_always": {"en": "torch.set_warn_always", "zh": "torch.set_warn_always"},
    "check.setting.stdout": {"en": "sys.stdout", "zh": "sys.stdout"},
    "check.setting.stderr": {"en": "sys.stderr", "zh": "sys.stderr"},
    "check.setting.tracer": {
        "en": "the tracer (sys.settrace / sys.setprofile)",
        "zh": "跟踪函数（sys.settrace / sys.setprofile）",
    },
    "check.unknown_exercise": {
        "en": "check: argument 'exercise' got {got!r}; needs one of {known}.",
        "zh": "check：参数 exercise 收到 {got!r}；应为以下之一：{known}。",
    },
    "check.not_callable": {
        "en": "check: argument 'function' got {got}; needs the function you wrote (pass it without calling it).",
        "zh": "check：参数 function 收到 {got}；应传入你写的函数本身（不要加括号调用）。",
    },
    # what differs, when no known mistake explains it (check.case puts the case in front)
    "diff.type": {
        "en": "{where} should be {expected}, but your function returned {got}.",
        "zh": "{where}应为 {expected}，你的函数却返回了 {got}。",
    },
    "diff.none": {
        "en": "{where} is None: did your function forget to `return` it?",
        "zh": "{where}是 None：你的函数是不是忘了写 `return`？",
    },
    "diff.subclass": {
        "en": "{where} is a {got}, a subclass of torch.Tensor; return a plain torch.Tensor.",
        "zh": "{where}是 {got}，一个 torch.Tensor 的子类；请返回普通的 torch.Tensor。",
    },
    "diff.dtype": {
        "en": "{where} should have dtype {expected}, but yours has dtype {got}.",
        "zh": "{where}的 dtype 应为 {expected}，你的结果是 {got}。",
    },
    "diff.plain": {
        "en": "{where} should be an ordinary dense tensor on {expected}, but yours is {got}.",
        "zh": "{where}应为 {expected} 上的普通稠密张量，你的结果却是 {got}。",
    },
    "diff.length": {
        "en": "{where} should hold {expected} items, but yours holds {got}.",
        "zh": "{where}应包含 {expected} 项，你的结果有 {got} 项。",
    },
    "diff.shape": {
        "en": "{where} should have shape {expected}, but yours has shape {got}.",
        "zh": "{where}的形状应为 {expected}，你的结果是 {got}。",
    },
    "diff.nan": {
        "en": "{where} contains NaN at index {index}; the reference has none there.",
        "zh": "{where}在索引 {index} 处出现 NaN，参考答案在该处没有 NaN。",
    },
    "diff.value": {
        "en": "{where} differs from the reference by up to {diff:.3g}, at index {index} (yours {got:.4g}, expected {expected:.4g}).",
        "zh": "{where}与参考答案最多相差 {diff:.3g}，位于索引 {index}（你的值 {got:.4g}，应为 {expected:.4g}）。",
    },
    "diff.entries": {
        "en": "{where} differs from the reference in {count} of its {total} entries, first at index {index} "
        "(yours {got}, expected {expected}).",
        "zh": "{where}的 {total} 个元素中有 {count} 个与参考答案不同，第一个位于索引 {index}（你的值 {got}，应为 {expected}）。",
    },
    "diff.equal": {
        "en": "{where} should be {expected!r}, but yours is {got!r}.",
        "zh": "{where}应为 {expected!r}，你的结果是 {got!r}。",
    },
    "diff.result": {"en": "the result", "zh": "返回值"},
    "diff.item": {"en": "value {number} of the result (counted from 1)", "zh": "返回值的第 {number} 项"},
    "diff.returned": {"en": "`{name}` (value {number} of the result)", "zh": "返回值 `{name}`（第 {number} 项）"},
    "diff.argument": {"en": "argument {number}", "zh": "参数 {number}"},
    "diff.separator": {"en": ", ", "zh": "，"},
    # plot labels
    "plot.key": {"en": "key", "zh": "键（key）"},
    "plot.query": {"en": "query", "zh": "查询（query）"},
    # lesson 00 (widgets, plots): keys start with "l00."
    "l00.plot.memory": {"en": "memory", "zh": "内存"},
    "l00.plot.index_order": {"en": "index order", "zh": "索引顺序"},
    "l00.plot.result": {"en": "result", "zh": "结果"},
    "l00.plot.head": {"en": "head {h}", "zh": "头 {h}"},
    "l00.permute.order": {"en": "permutation", "zh": "维度顺序"},
    "l00.permute.contiguous": {"en": "then .contiguous()", "zh": "再调用 .contiguous()"},
    "l00.permute.summary": {
        "en": "{code}\nshape {shape}, stride {stride}, contiguous: {contiguous}\nshares memory with x: {shares} ({kind})",
        "zh": "{code}\n形状 {shape}，步长 {stride}，连续：{contiguous}\n与 x 共享内存：{shares}（{kind}）",
    },
    "l00.view": {"en": "a view", "zh": "视图"},
    "l00.copy": {"en": "a copy", "zh": "副本"},
    "l00.true": {"en": "True", "zh": "是"},
    "l00.false": {"en": "False", "zh": "否"},
    "l00.broadcast.mask": {"en": "mask", "zh": "掩码"},
    "l00.broadcast.scores": {"en": "scores", "zh": "分数"},
    "l00.broadcast.ok": {
        "en": "mask {mask} with scores {scores} → result {result}",
        "zh": "掩码 {mask} 与分数 {scores} → 结果 {result}",
    },
    "l00.broadcast.clash": {
        "en": "mask {mask} with scores {scores} → error: on axis {axis} the sizes {size_mask} and {size_scores} "
        "differ and neither is 1",
        "zh": "掩码 {mask} 与分数 {scores} → 报错：第 {axis} 维的大小 {size_mask} 与 {size_scores} 不同，且都不为 1",
    },
    "l00.broadcast.separator": {"en": ", ", "zh": "、"},
    "l00.broadcast.grows": {
        "en": "the result {result} is bigger than the scores {scores}: their size-1 axis {names} was repeated",
        "zh": "结果 {result} 比分数 {scores} 还大：分数中大小为 1 的 {names} 维被重复了",
    },
    "l00.broadcast.aligned": {
        "en": "the mask's axes line up with the scores axes {names}",
        "zh": "掩码的各维依次与分数的 {names} 维对齐",
    },
    # lesson 01 (widgets, plots): keys start with "l01."
    "l01.score_additive": {"en": "additive", "zh": "加性"},
    "l01.score_bilinear": {"en": "bilinear", "zh": "双线性"},
    "l01.score_dot": {"en": "dot", "zh": "点积"},
    "l01.score_scaled_dot": {"en": "scaled dot", "zh": "缩放点积"},
    "l01.weight": {"en": "weight", "zh": "权重"},
    "l01.score": {"en": "score", "zh": "分数"},
    "l01.density": {"en": "density", "zh": "密度"},
    "l01.standard_normal": {"en": "standard normal", "zh": "标准正态分布"},
    "l01.uniform": {"en": "uniform, 1/{keys}", "zh": "均匀分布 1/{keys}"},
    "l01.variance_title": {"en": "variance of the scores", "zh": "分数的方差"},
    "l01.max_weight_title": {
        "en": "largest softmax weight (mean, {keys} keys)",
        "zh": "最大 softmax 权重（均值，{keys} 个键）",
    },
    "l01.gradient_title": {
        "en": "size of the softmax gradient (mean ‖J‖)",
        "zh": "softmax 梯度的大小（‖J‖ 的均值）",
    },
    "l01.divide_by_sqrt": {"en": "divide by √d_k", "zh": "除以 √d_k"},
    "l01.scaled": {"en": "divided by √d_k", "zh": "除以 √d_k"},
    "l01.unscaled": {"en": "not scaled", "zh": "未缩放"},
    "l01.scores_title": {"en": "{n} scores, {mode}", "zh": "{n} 个分数，{mode}"},
    "l01.weights_title": {
        "en": "softmax weights of query 0 over {keys} keys",
        "zh": "查询 0 对 {keys} 个键的 softmax 权重",
    },
    "l01.scaling_summary": {
        "en": "d_k = {d_k}, {mode}: std of the scores {std:.2f};\n"
        "largest weight of query 0 {top:.2f}; largest weight averaged over {queries} queries {mean_top:.2f}",
        "zh": "d_k = {d_k}，{mode}：分数的标准差 {std:.2f}；\n"
        "查询 0 的最大权重 {top:.2f}；{queries} 个查询的最大权重平均为 {mean_top:.2f}",
    },
    # lesson 02 (widgets, plots): keys start with "l02."
    "l02.sequence": {"en": "sequence {n}", "zh": "序列 {n}"},
    "l02.causal": {"en": "causal mask", "zh": "因果掩码"},
    "l02.plot.mask_title": {"en": "keep mask, sequence {n}", "zh": "保留掩码，序列 {n}"},
    "l02.plot.weights_title": {"en": "weights, sequence {n}", "zh": "注意力权重，序列 {n}"},
    "l02.plot.keep": {"en": "keep", "zh": "保留"},
    "l02.plot.hidden": {"en": "hidden", "zh": "遮住"},
    "l02.plot.slot": {"en": "slot {n}", "zh": "槽位 {n}"},
    "l02.plot.qkv_slot": {"en": "head {h}, item {b}", "zh": "头 {h}，样本 {b}"},
    "l02.plot.mask_slot": {"en": "mask of item {b}", "zh": "样本 {b} 的掩码"},
    "l02.plot.qkv_header": {"en": "Q, K, V\nhead-major: h·B + b", "zh": "Q、K、V\n头优先：h·B + b"},
    "l02.plot.qkv_header_batch": {"en": "Q, K, V\nbatch-major: b·H + h", "zh": "Q、K、V\n批量优先：b·H + h"},
    "l02.plot.mask_header_batch": {"en": "mask\nbatch-major: b·H + h", "zh": "掩码\n批量优先：b·H + h"},
    "l02.plot.mask_header_head": {"en": "mask\nhead-major: h·B + b", "zh": "掩码\n头优先：h·B + b"},
    "l02.summary": {"en": "lengths {lengths}, causal mask: {causal}", "zh": "长度 {lengths}，因果掩码：{causal}"},
    "l02.on": {"en": "on", "zh": "开"},
    "l02.off": {"en": "off", "zh": "关"},
    "l02.visible": {
        "en": "sequence {n}: keys each query may see {counts}",
        "zh": "序列 {n}：每个查询可见的键数 {counts}",
    },
    "l02.hidden_rows": {
        "en": "fully masked rows: {count} (their weights are all 0)",
        "zh": "全遮蔽行：{count} 行（其权重全为 0）",
    },
    # lesson 03 (widgets, plots): keys start with "l03."
    "l03.example": {"en": "example", "zh": "样例"},
    "l03.correct": {"en": "correct", "zh": "正确"},
    "l03.wrong": {"en": "wrong", "zh": "错误"},
    "l03.self_attention": {"en": "self-attention", "zh": "自注意力"},
    "l03.cross_attention": {"en": "cross-attention", "zh": "交叉注意力"},
    "l03.self_title": {"en": "self-attention, reverse", "zh": "自注意力：反转"},
    "l03.cross_title": {"en": "cross-attention, double", "zh": "交叉注意力：重复"},
    "l03.map_title": {"en": "{title}: {when}", "zh": "{title}（{when}）"},
    "l03.before": {"en": "before training", "zh": "训练前"},
    "l03.after": {"en": "after training", "zh": "训练后"},
    "l03.step": {"en": "training step", "zh": "训练步数"},
    "l03.loss": {"en": "loss", "zh": "损失"},
    "l03.reverse": {"en": "reverse", "zh": "反转"},
    "l03.double": {"en": "double", "zh": "重复"},
    "l03.input_label": {"en": "input (keys)", "zh": "输入（键）"},
    "l03.output_label": {"en": "output (queries)", "zh": "输出（查询）"},
    "l03.example_summary": {
        "en": "example {index}: input {tokens}\n"
        "reverse: predicted {reverse}, expected {reverse_target}: {reverse_ok}\n"
        "double:  predicted {double}, expected {double_target}: {double_ok}",
        "zh": "样例 {index}：输入 {tokens}\n"
        "反转：预测 {reverse}，正确答案 {reverse_target}：{reverse_ok}\n"
        "重复：预测 {double}，正确答案 {double_target}：{double_ok}",
    },
    # lesson 04 (widgets, plots): keys start with "l04."
    "l04.plot.head": {"en": "head {h}", "zh": "头 {h}"},
    "l04.plot.keys": {"en": "input (keys)", "zh": "输入（键）"},
    "l04.plot.queries": {"en": "position (queries)", "zh": "位置（查询）"},
    "l04.plot.one_head": {"en": "1 head, linear read-out", "zh": "1 个头，线性读出层"},
    "l04.plot.model_head": {"en": "{model}\nhead {h}", "zh": "{model}\n头 {h}"},
    "l04.plot.two_heads": {"en": "2 heads, linear read-out", "zh": "2 个头，线性读出层"},
    "l04.plot.mlp_head": {"en": "1 head, MLP read-out", "zh": "1 个头，MLP 读出层"},
    "l04.plot.naive": {"en": "naive (loop over heads)", "zh": "朴素版（逐头循环）"},
    "l04.plot.fused": {"en": "fused", "zh": "融合版"},
    "l04.plot.torch": {"en": "nn.MultiheadAttention", "zh": "nn.MultiheadAttention"},
    "l04.plot.sdpa": {"en": "fused + F.sdpa (no weights)", "zh": "融合版 + F.sdpa（不返回权重）"},
    "l04.plot.heads_axis": {"en": "number of heads H (E fixed)", "zh": "头数 H（E 固定）"},
    "l04.plot.width_axis": {"en": "E (d = E / H, H = 8)", "zh": "E（d = E / H，H = 8）"},
    "l04.plot.length_axis": {"en": "sequence length L", "zh": "序列长度 L"},
    "l04.plot.time": {"en": "milliseconds per call", "zh": "每次调用的毫秒数"},
    "l04.plot.memory": {"en": "MB", "zh": "MB"},
    "l04.plot.memory_title": {"en": "what one call stores (B = 8, E = 512, H = 8)",
                              "zh": "一次调用存下的数据（B = 8，E = 512，H = 8）"},
    "l04.plot.weights_memory": {"en": "weights (B, H, L, L)", "zh": "权重 (B, H, L, L)"},
    "l04.plot.activations_memory": {"en": "Q, K, V and output (4 × (B, L, E))", "zh": "Q、K、V 与输出（4 × (B, L, E)）"},
    "l04.example": {"en": "example", "zh": "样例"},
    "l04.head": {"en": "head", "zh": "头"},
    "l04.left": {"en": "left neighbour", "zh": "左邻"},
    "l04.right": {"en": "right neighbour", "zh": "右邻"},
    "l04.role": {
        "en": "gives its {side} more than 0.6 of its weight at every query",
        "zh": "在每个查询上都把超过 0.6 的权重给了{side}",
    },
    "l04.role_none": {
        "en": "gives neither neighbour more than 0.6 of its weight at every query",
        "zh": "没有在每个查询上都把超过 0.6 的权重给同一侧的邻居",
    },
    "l04.correct": {"en": "correct", "zh": "正确"},
    "l04.wrong": {"en": "wrong", "zh": "错误"},
    "l04.heads_summary": {
        "en": "example {index}: input {tokens}\n"
        "this head {role}\n"
        "left neighbours:  predicted {left}, expected {left_target}\n"
        "right neighbours: predicted {right}, expected {right_target}\n"
        "both: {verdict}",
        "zh": "样例 {index}：输入 {tokens}\n"
        "这个头{role}\n"
        "左邻：预测 {left}，正确答案 {left_target}\n"
        "右邻：预测 {right}，正确答案 {right_target}\n"
        "两侧：{verdict}",
    },
    # lesson 05, sections 1-6 (widgets, plots): keys start with "l05." (not l05.facts/cost/bugs)
    "l05.plot.row_measure": {"en": "M̄ = {m:.2f}, largest weight {top:.2f}", "zh": "M̄ = {m:.2f}，最大权重 {top:.2f}"},
    "l05.trace.no_step": {"en": "no step of this name; the steps are {names}", "zh": "没有这个名字的步骤；已有的步骤是 {names}"},
    "l05.plot.uniform": {"en": "uniform: 1/{n}", "zh": "均匀：1/{n}"},
    "l05.plot.row_label": {"en": "{label}: {text}", "zh": "{label}：{text}"},
    "l05.plot.query_chosen": {"en": "query (◂ chosen)", "zh": "查询（◂ 被选中）"},
    "l05.plot.plain": {"en": "plain (gathers K_sample)", "zh": "朴素版（收集 K_sample）"},
    "l05.plot.fast": {"en": "fast (sampled_addmm, no K_sample)", "zh": "快速版（sampled_addmm，没有 K_sample）"},
    "l05.plot.allocated": {"en": "memory allocated (log scale)", "zh": "分配的内存（对数刻度）"},
    "l05.plot.view_bar": {"en": "0 B: a view ({size} as a copy)", "zh": "0 B：视图（若拷贝则为 {size}）"},
    "l05.plot.expand_title": {"en": "K_expand: 24 elements read the 6 cells of K",
                              "zh": "K_expand：24 个元素读的是 K 的 6 个单元"},
    "l05.plot.sample_title": {"en": "K_sample: 16 elements, 16 new cells",
                              "zh": "K_sample：16 个元素，16 个新单元"},
    "l05.walk.step": {"en": "step", "zh": "步骤"},
    "l05.walk.shape": {"en": "shape", "zh": "形状"},
    "l05.walk.kind": {"en": "view or new", "zh": "视图或新张量"},
    "l05.walk.bytes": {"en": "allocated", "zh": "分配的内存"},
    "l05.walk.logical": {"en": "as a copy", "zh": "若为副本"},
    "l05.walk.view": {"en": "view", "zh": "视图"},
    "l05.walk.new": {"en": "new", "zh": "新张量"},
    "l05.walk.total": {"en": "total", "zh": "合计"},
    "l05.walk.factor": {"en": "factor c", "zh": "因子 c"},
    "l05.walk.title": {"en": "{sizes}, factor {factor}", "zh": "{sizes}，因子 {factor}"},
    "l05.walk.counts": {
        "en": "{sizes}, factor {factor}: U = {U} sampled keys per query, u = {u} chosen queries",
        "zh": "{sizes}，因子 {factor}：每个查询采样 U = {U} 个键，选出 u = {u} 个查询",
    },
    "l05.walk.verdict": {
        "en": "K_sample alone: {sample}, {share:.0f} % of what the plain version allocates;\n"
        "the fast version allocates {fast} in all, 1/{ratio:.0f} of the plain version's",
        "zh": "仅 K_sample 就占 {sample}，是朴素版分配内存的 {share:.0f}%；\n"
        "快速版一共只分配 {fast}，是朴素版的 1/{ratio:.0f}",
    },
    # lesson 05, sections 7-9 (plots): keys start with "l05.bugs.", "l05.facts.", "l05.cost."
    "l05.bugs.divide_by_u": {"en": "max − sum / U (the course)", "zh": "最大值 − 和 / U（本课程）"},
    "l05.bugs.divide_by_lk": {"en": "max − sum / L_K (both codes)", "zh": "最大值 − 和 / L_K（两份代码）"},
    "l05.bugs.offset_axis": {"en": "common key offset (L = 512, key length ≈ 8)", "zh": "键的共同偏移（L = 512，键长约为 8）"},
    "l05.bugs.recall_axis": {"en": "share of the 10 active queries chosen", "zh": "10 个活跃查询中被选中的比例"},
    "l05.facts.random_probsparse": {"en": "ProbSparse, random inputs", "zh": "ProbSparse，随机输入"},
    "l05.facts.random_mean": {"en": "mean(V), random inputs", "zh": "mean(V)，随机输入"},
    "l05.facts.dominant_probsparse": {"en": "ProbSparse, a few dominant queries", "zh": "ProbSparse，少数主导查询"},
    "l05.facts.dominant_mean": {"en": "mean(V), a few dominant queries", "zh": "mean(V)，少数主导查询"},
    "l05.facts.length_axis": {"en": "sequence length L", "zh": "序列长度 L"},
    "l05.facts.error_axis": {"en": "relative error vs full attention", "zh": "相对完整注意力的误差"},
    "l05.facts.random": {"en": "random inputs", "zh": "随机输入"},
    "l05.facts.dominant": {"en": "a few dominant queries", "zh": "少数主导查询"},
    "l05.facts.chance": {"en": "chance (u / L)", "zh": "随机水平（u / L）"},
    "l05.facts.sample_axis": {"en": "sampled keys per query U (L = 512, u = 35)", "zh": "每个查询的采样键数 U（L = 512，u = 35）"},
    "l05.facts.recall_axis": {"en": "recall of the 10 most active", "zh": "最活跃 10 个查询的召回率"},
    "l05.trained.encoder_self": {"en": "encoder self-attention", "zh": "编码器自注意力"},
    "l05.trained.decoder_self": {"en": "decoder self-attention", "zh": "解码器自注意力"},
    "l05.trained.cross": {"en": "cross-attention", "zh": "交叉注意力"},
    "l05.trained.measure_axis": {"en": "M̄ of a row (max − mean of its scaled scores)",
                                 "zh": "一行的 M̄（缩放后分数的最大值 − 平均值）"},
    "l05.trained.density_axis": {"en": "share of rows (density)", "zh": "行的占比（密度）"},
    "l05.trained.row": {
        "en": "{name}: {rows} rows, {lazy:.0%} lazy (no key gets twice the uniform weight), median M̄ {median:.2f}",
        "zh": "{name}：{rows} 行，{lazy:.0%} 是惰性的（没有哪个键分到均匀权重的两倍），M̄ 中位数 {median:.2f}",
    },
    "l05.cost.sdpa": {"en": "F.scaled_dot_product_attention", "zh": "F.scaled_dot_product_attention"},
    "l05.cost.plain": {"en": "ProbSparse, plain (gathers K_sample)", "zh": "ProbSparse 朴素版（收集 K_sample）"},
    "l05.cost.fast": {"en": "ProbSparse, fast (no K_sample)", "zh": "ProbSparse 快速版（没有 K_sample）"},
    "l05.cost.weights": {"en": "full attention's weights (B, H, L, L)", "zh": "完整注意力的权重 (B, H, L, L)"},
    "l05.cost.length_axis": {"en": "sequence length L (B = 1, H = 8, D = 64)", "zh": "序列长度 L（B = 1，H = 8，D = 64）"},
    "l05.cost.time_axis": {"en": "milliseconds per call", "zh": "每次调用的毫秒数"},
    "l05.cost.memory_axis": {"en": "memory allocated", "zh": "分配的内存"},
    # lesson 06 plots (course_utils.viz.blocks): the decoder's two masks, a layer's cost by part
    "viz.decoder.target_title": {"en": "item {b}: target mask (self-attention)", "zh": "样本 {b}：目标掩码（自注意力）"},
    "viz.decoder.memory_title": {"en": "item {b}: source mask (cross-attention)", "zh": "样本 {b}：源掩码（交叉注意力）"},
    "viz.decoder.queries": {"en": "target position (query)", "zh": "目标位置（查询）"},
    "viz.decoder.target_keys": {"en": "target position (key)", "zh": "目标位置（键）"},
    "viz.decoder.memory_keys": {"en": "source position (key in memory)", "zh": "源位置（memory 中的键）"},
    "viz.cost.attention": {"en": "attention", "zh": "注意力"},
    "viz.cost.self_attention": {"en": "self-attention", "zh": "自注意力"},
    "viz.cost.cross_attention": {"en": "cross-attention", "zh": "交叉注意力"},
    "viz.cost.feed_forward": {"en": "feed-forward network", "zh": "前馈网络"},
    "viz.cost.norms": {"en": "LayerNorms", "zh": "LayerNorm"},
    "viz.cost.length_axis": {"en": "sequence length L", "zh": "序列长度 L"},
    "viz.cost.flops_axis": {"en": "multiply-adds per sequence", "zh": "每条序列的乘加次数"},
    "viz.cost.share_axis": {"en": "share of the layer's multiply-adds", "zh": "占整层乘加次数的比例"},
    "viz.cost.crossover": {"en": "L = {length}", "zh": "L = {length}"},
    # lesson 06 plots (course_utils.viz.positions): positional encodings, post-norm against pre-norm
    "viz.positions.position": {"en": "position p", "zh": "位置 p"},
    "viz.positions.feature": {"en": "feature", "zh": "特征"},
    "viz.positions.value": {"en": "value", "zh": "取值"},
    "viz.positions.table_title": {"en": "sinusoidal encoding, L = {length}, E = {width}",
                                  "zh": "正弦位置编码，L = {length}，E = {width}"},
    "viz.positions.sine": {"en": "sin", "zh": "正弦"},
    "viz.positions.cosine": {"en": "cos", "zh": "余弦"},
    "viz.positions.curve": {"en": "feature {feature} ({kind})", "zh": "特征 {feature}（{kind}）"},
    "viz.positions.offset": {"en": "offset k", "zh": "偏移 k"},
    "viz.positions.dot": {"en": "dot product PE[p] · PE[p + k]", "zh": "点积 PE[p] · PE[p + k]"},
    "viz.positions.start": {"en": "from p = {p}", "zh": "从 p = {p} 起"},
    "viz.positions.layer_axis": {"en": "n (x_n: the input of layer n; x_N: the top of the stack)",
                                 "zh": "n（x_n：第 n 层的输入；x_N：整个堆叠的顶端）"},
    "viz.positions.gradient_axis": {"en": "gradient at x_n ÷ gradient at x_N", "zh": "x_n 处的梯度 ÷ x_N 处的梯度"},
    "viz.positions.post": {"en": "post-norm", "zh": "后归一化（Post-LN）"},
    "viz.positions.pre": {"en": "pre-norm", "zh": "前归一化（Pre-LN）"},
    # lesson 06: training with and without a learning-rate warm-up (course_utils.viz.positions.warmup_curves)
    "viz.warmup.without": {"en": "{order}, no warm-up", "zh": "{order}，不预热"},
    "viz.warmup.with": {"en": "{order}, {steps}-step warm-up", "zh": "{order}，预热 {steps} 步"},
    "viz.warmup.schedule_without": {"en": "no warm-up", "zh": "不预热"},
    "viz.warmup.schedule_with": {"en": "{steps}-step warm-up", "zh": "预热 {steps} 步"},
    "viz.warmup.step": {"en": "training step", "zh": "训练步数"},
    "viz.warmup.loss": {"en": "training loss", "zh": "训练损失"},
    "viz.warmup.rate": {"en": "learning rate", "zh": "学习率"},
    # lesson 06 plots and explorer (course_utils.viz.seq2seq, widgets.seq2seq): the trained encoder–decoder
    "viz.seq2seq.self_title": {"en": "head {h}: self-attention (target mask)", "zh": "头 {h}：自注意力（目标掩码）"},
    "viz.seq2seq.cross_title": {"en": "head {h}: cross-attention (source mask)", "zh": "头 {h}：交叉注意力（源掩码）"},
    "viz.seq2seq.self_keys": {"en": "decoder input (key)", "zh": "解码器的输入（键）"},
    "viz.seq2seq.cross_keys": {"en": "source (key in memory)", "zh": "源序列（memory 中的键）"},
    "viz.seq2seq.queries": {"en": "step: read → said (query)", "zh": "每一步：读入 → 输出（查询）"},
    "viz.seq2seq.weight": {"en": "attention weight", "zh": "注意力权重"},
    "viz.seq2seq.masked": {"en": "masked: weight exactly 0", "zh": "被遮住：权重恰为 0"},
    "viz.seq2seq.suptitle": {"en": "greedy decoding of {source}: {answer}", "zh": "对 {source} 贪心解码：{answer}"},
    "viz.seq2seq.offset_axis": {"en": "source position − needed position", "zh": "源位置 − 所需位置"},
    "viz.seq2seq.offset_weight": {"en": "mean cross-attention weight", "zh": "交叉注意力的平均权重"},
    "viz.seq2seq.example": {"en": "example", "zh": "样例"},
    "viz.seq2seq.letters": {"en": "letters", "zh": "字母"},
    "viz.seq2seq.placeholder": {"en": "e.g. abcd (empty: the example)", "zh": "例如 abcd（留空：用样例）"},
    "viz.seq2seq.held_out": {"en": "held-out example {index}", "zh": "留出样例 {index}"},
    "viz.seq2seq.yours": {"en": "your letters", "zh": "你输入的字母"},
    "viz.seq2seq.summary": {
        "en": "{which}: source {source}\ngreedy answer {answer}, right answer {target}: {verdict}",
        "zh": "{which}：源序列 {source}\n贪心解码的答案 {answer}，正确答案 {target}：{verdict}",
    },
    "viz.seq2seq.agree": {"en": "they agree", "zh": "二者一致"},
    "viz.seq2seq.differ": {"en": "they differ", "zh": "二者不一致"},
    "viz.seq2seq.bad_letters": {
        "en": "Type 1 to {most} letters from a to {last}, such as abcd (you typed '{text}'), or leave the box "
              "empty to see the example the slider picks.",
        "zh": "请输入 1 到 {most} 个 a 到 {last} 之间的字母，例如 abcd（你输入的是“{text}”）；"
              "或者留空，查看滑块选中的样例。",
    },
    # lesson 07: attention at inference time (viz/decoding.py, widgets/decoding.py)
    "l07.plot.bytes_per_token": {"en": "KV cache per token, all layers, float16", "zh": "每个词元的 KV 缓存（所有层，float16）"},
    "l07.plot.tokens": {"en": "tokens in the sequence", "zh": "序列中的词元数"},
    "l07.plot.cache_bytes": {"en": "KV cache of one sequence, float16", "zh": "一条序列的 KV 缓存（float16）"},
    "l07.plot.kv_head": {"en": "K/V head {h}", "zh": "键/值头 {h}"},
    "l07.plot.slot": {"en": "slots of the cache, each labelled with the position it holds",
                      "zh": "缓存的槽位（标注的是每个槽位存着的位置）"},
    "l07.plot.step_axis": {"en": "tokens so far, T", "zh": "已有的词元数 T"},
    "l07.plot.flops_axis": {"en": "multiply-adds for the next token", "zh": "生成下一个词元的乘加次数"},
    "l07.plot.cached": {"en": "with the KV cache", "zh": "使用 KV 缓存"},
    "l07.plot.recomputed": {"en": "recomputing every token", "zh": "每次重新计算全部词元"},
    "l07.plot.causal": {"en": "causal mask", "zh": "因果掩码"},
    "l07.plot.window": {"en": "sliding window, W = {w}", "zh": "滑动窗口，W = {w}"},
    "l07.timing": {
        "en": "greedy decoding of {n} new tokens: {cached:.0f} ms with the cache, {recomputed:.0f} ms recomputing every "
              "token ({ratio:.1f} times as long)",
        "zh": "贪心解码 {n} 个新词元：使用缓存用时 {cached:.0f} 毫秒，每次重新计算全部词元用时 {recomputed:.0f} 毫秒"
              "（是前者的 {ratio:.1f} 倍）",
    },
    "l07.pooled": {
        "en": "held-out sources reversed exactly: {before:.1%} with 2 key/value heads, {after:.1%} with them "
              "mean-pooled into 1",
        "zh": "完全反转正确的留出源序列：2 个键/值头时为 {before:.1%}，平均合并成 1 个之后为 {after:.1%}",
    },
    "l07.widget.tokens": {"en": "tokens", "zh": "词元数"},
    "l07.widget.variant": {"en": "attention", "zh": "注意力"},
    "l07.widget.window": {"en": "window", "zh": "窗口"},
    "l07.widget.no_window": {"en": "none", "zh": "无"},
    "l07.widget.title": {"en": "{variant}, after {n} tokens: the cache holds {held}",
                         "zh": "{variant}，生成 {n} 个词元之后：缓存中有 {held} 个"},
    "l07.widget.summary": {
        "en": "{variant}, window {window}, tokens generated: {n}. The cache holds {held} of them × {kv} key/value heads.\n"
              "This toy layer (d = 64, float16): {toy}. Llama-2-70B's shape (80 layers, d = 128) with H_kv = {big_kv}: {big}.\n"
              "The newest token's queries attended to {keys} keys, its own included.",
        "zh": "{variant}，窗口：{window}，已生成 {n} 个词元。缓存中有其中的 {held} 个 × {kv} 个键/值头。\n"
              "这个玩具层（d = 64，float16）：{toy}。换成 Llama-2-70B 的形状（80 层，d = 128）、H_kv = {big_kv}：{big}。\n"
              "最新词元的查询关注了 {keys} 个键（包括它自己）。",
    },
    # the learner's progress (course_utils.learner.progress): each check's latest verdict
    "progress.none": {
        "en": "No exercise checked yet. Run a lesson's check cell: your progress shows here.",
        "zh": "还没有检查过任何练习。在某一课里运行检查单元后，你的进度就会显示在这里。",
    },
    "progress.summary": {
        "en": "{passed} of {total} exercises passed.",
        "zh": "共 {total} 道练习，已通过 {passed} 道。",
    },
    "progress.columns": {"en": "Lesson|✔|Exercise|Latest check", "zh": "课|✔|练习|最近一次检查"},
    "progress.passed": {"en": "✔ passed", "zh": "✔ 通过"},
    "progress.failed": {"en": "✘ not yet", "zh": "✘ 还不对"},
    "progress.not attempted": {"en": "○ not attempted", "zh": "○ 尚未作答"},
    "progress.crashed": {"en": "⚠ crashed", "zh": "⚠ 出错"},
    "progress.unchecked": {"en": "·", "zh": "·"},
    # hints an exercise gives when asked (course_utils.exercises.hints), and the check's word that they exist
    "hint.text": {"en": "Hint {number} of {total} for {exercise}: {text}", "zh": "{exercise} 的提示 {number}/{total}：{text}"},
    "hint.next": {"en": "Still stuck? hint(\"{exercise}\") again gives the next one: the idea.",
                  "zh": "还是做不出来？再运行一次 hint(\"{exercise}\")，下一条提示会讲出思路。"},
    "hint.last": {"en": "That was the last hint. The lesson's text just above the exercise shows every step it needs.",
                  "zh": "这是最后一条提示了。练习上方的正文讲过它用到的每一步。"},
    "check.hint_offer": {
        "en": "Stuck? `from course_utils import hint`, then `hint(\"{exercise}\")`: two hints, one at a time "
        "(a nudge, then the idea).",
        "zh": "做不出来？先运行 `from course_utils import hint`，再运行 `hint(\"{exercise}\")`：共两条提示，一次一条"
        "（先点拨，再讲思路）。",
    },
    "progress.passed_before": {"en": "; ✔ passed before, on {date}", "zh": "；✔ 曾于 {date} 通过"},
    "progress.lesson_count": {"en": "✔ {passed} of {total}", "zh": "✔ {passed}/{total}"},
    "progress.lesson_count_none": {"en": "{passed} of {total}", "zh": "{passed}/{total}"},
    # the learner's work folder and its commands (course_utils.learner, course_utils.launch), in the terminal
    "learner.copied": {"en": "{path}: copied from the course", "zh": "{path}：已从课程复制"},
    "learner.changed": {
        "en": "The course has a newer version of {lessons}. `make update` (or `python -m course_utils update {work}`) "
        "brings it in and keeps every exercise you changed; your copy as it is now is kept in the folder before-update/.",
        "zh": "课程中 {lessons} 有了新版本。运行 `make update`（或 `python -m course_utils update {work}`）即可换成新版，"
        "你改过的每道练习都会保留；你现在的副本也会原样保存在 before-update/ 文件夹里。",
    },
    "learner.updated": {
        "en": "{path}: now the course's new version; your answers kept: {kept}; your previous copy: {old}",
        "zh": "{path}：已换成课程的新版本；保留了你的答案：{kept}；你之前的副本：{old}",
    },
    "learner.kept_none": {"en": "none (you had changed no exercise)", "zh": "无（你还没有改过任何练习）"},
    # a lesson whose file the course renamed (the Chinese copies got Chinese names; course_utils.file_names)
    "learner.renamed": {
        "en": "{old}: the course now calls this lesson {path}; your answers and your own cells move there "
        "(the file under the old name is kept in before-update/).",
        "zh": "{old}：课程现在把这一课命名为 {path}；你的答案和你添加的单元格都会移到新文件中"
        "（旧名字的文件保存在 before-update/ 文件夹里）。",
    },
    "learner.lost": {
        "en": "  The new version has no exercise {exercise}: your answer to it is in {old}.",
        "zh": "  新版本中没有练习 {exercise}：你对它的答案保存在 {old} 中。",
    },
    # what `make update` kept of the cells the learner wrote (course_utils.learner.update)
    "learner.own_kept": {
        "en": "  Your own cell «{cell}» kept: now cell {number}, after «{after}».",
        "zh": "  保留了你自己添加的单元格「{cell}」：现在是第 {number} 个单元格，位于「{after}」之后。",
    },
    "learner.own_top": {
        "en": "  Your own cell «{cell}» kept: now cell {number}, at the top (the cells it followed are gone).",
        "zh": "  保留了你自己添加的单元格「{cell}」：现在是第 {number} 个单元格，位于开头（它原先跟随的单元格已不存在）。",
    },
    "learner.edit_kept": {
        "en": "  Your change to the course's cell «{cell}» kept (the course did not change that cell).",
        "zh": "  保留了你对课程单元格「{cell}」的修改（课程没有改动这个单元格）。",
    },
    "learner.edit_left": {
        "en": "  The course changed the cell «{cell}», which you had changed too: the course's new version is in the "
        "lesson, your version in {old}.",
        "zh": "  课程改动了单元格「{cell}」，而你也改过它：课中现在是课程的新版本，你的版本保存在 {old} 中。",
    },
    "launch.address": {
        "en": "From another machine: `ssh -N -L {port}:localhost:{port} you@this-machine`, then open the address there; "
        "or start with IP=0.0.0.0 and put this machine's name in the address.",
        "zh": "在另一台机器上使用：先运行 `ssh -N -L {port}:localhost:{port} 你@这台机器`，再在那台机器上打开这个地址；"
        "或者用 IP=0.0.0.0 启动，并把地址中的主机名换成这台机器的名字。",
    },
    # what the launch says once JupyterLab has started (course_utils.launch.announcement)
    "launch.open": {
        "en": "Open the course at this address (it carries your token): {url}",
        "zh": "在浏览器中打开这个地址即可进入课程（地址带令牌）：{url}",
    },
    "launch.opened": {
        "en": "Your browser opens the course at this address (it carries your token; open it yourself if no browser "
        "opens): {url}",
        "zh": "浏览器会打开课程的这个地址（地址带令牌；如果浏览器没有打开，请自己打开它）：{url}",
    },
    "learner.up_to_date": {"en": "Every lesson you have is the course's latest: nothing to update.",
                           "zh": "你的每一课都已是课程的最新版本：无需更新。"},
    # a copy an earlier `make update` kept beside its lesson, moved to before-update/ (learner.move_old_copies)
    "learner.old_copy_moved": {
        "en": "{old}: a copy of your lesson kept by an earlier update, moved to {new} (the folder where updates "
        "keep your previous copies now, out of the way of your lessons).",
        "zh": "{old}：这是早先一次更新保存的你这一课的旧副本，已移到 {new}（更新现在把你之前的副本都放在这个文件夹里，"
        "不再和课程文件混在一起）。",
    },
    # lesson 08: the tile pictures, the memory plot and the tile explorer (viz.tiled, widgets.tiled)
    "l08.plot.full": {"en": "computed, no mask", "zh": "计算，无需掩码"},
    "l08.plot.partial": {"en": "computed, masked", "zh": "计算，需要掩码"},
    "l08.plot.skip": {"en": "skipped", "zh": "跳过"},
    "l08.plot.pending": {"en": "not yet", "zh": "尚未计算"},
    "l08.plot.current": {"en": "this step", "zh": "当前这一步"},
    "l08.plot.query_block": {"en": "query block i", "zh": "查询块 i"},
    "l08.plot.key_block": {"en": "key/value block j", "zh": "键/值块 j"},
    "l08.plot.tiles": {"en": "{title}: {computed} of {total} tiles computed",
                       "zh": "{title}：{total} 个分块中计算 {computed} 个"},
    "l08.plot.length": {"en": "sequence length L", "zh": "序列长度 L"},
    "l08.plot.bytes": {"en": "peak bytes of the tensors created", "zh": "所建张量的峰值字节数"},
    "l08.plot.memory_title": {"en": "B = 1, H = 8, d = 64, float32, no gradients",
                              "zh": "B = 1，H = 8，d = 64，float32，不求梯度"},
    "l08.plot.tiled": {"en": "tiled (blocks of {block}), slope {slope:.2f}", "zh": "分块版（块大小 {block}），斜率 {slope:.2f}"},
    "l08.plot.materialised": {"en": "materialised, slope {slope:.2f}", "zh": "完整矩阵版，斜率 {slope:.2f}"},
    "l08.plot.output": {"en": "rows so far (acc / ℓ)", "zh": "目前的输出行（acc / ℓ）"},
    "l08.plot.exact": {"en": "exact output", "zh": "精确输出"},
    "l08.plot.feature": {"en": "feature", "zh": "特征"},
    "l08.plot.query": {"en": "query", "zh": "查询"},
    "l08.widget.step": {"en": "step", "zh": "步骤"},
    "l08.widget.block": {"en": "block", "zh": "块大小"},
    "l08.widget.causal": {"en": "causal", "zh": "因果"},
    "l08.widget.start": {"en": "step 0 of {steps}: nothing seen yet (m = −∞, ℓ = 0, acc = 0)",
                         "zh": "第 0 步（共 {steps} 步）：还没有处理任何分块（m = −∞，ℓ = 0，acc = 0）"},
    "l08.widget.tile": {"en": "step {step} of {steps}: query block {i} × key block {j} ({kind}); "
                        "rows {rows} updated", "zh": "第 {step} 步（共 {steps} 步）：查询块 {i} × 键块 {j}（{kind}）；"
                        "更新了第 {rows} 行"},
    "l08.widget.header": {"en": "query     m        ℓ    output so far      exact output",
                          "zh": "查询      m        ℓ    目前的输出         精确输出"},
    "l08.widget.done": {"en": "every row is final: the output equals softmax(QKᵀ/√d)V to 1e-6",
                        "zh": "每一行都已完成：输出与 softmax(QKᵀ/√d)V 相差不超过 1e-6"},
    "l08.widget.skipped": {"en": "tiles skipped: {skipped} of {total}", "zh": "跳过的分块：{total} 个中的 {skipped} 个"},
    # lesson 10: the next-character explorer, temperature and top-k (widgets/next_character.py)
    "next_char.temperature": {"en": "temperature", "zh": "温度"},
    "next_char.top_k": {"en": "top-k (0: no cut)", "zh": "top-k（0：不截断）"},
    "next_char.seed": {"en": "seed", "zh": "随机种子"},
    "next_char.title": {"en": "the next character after “{tail}”", "zh": "“{tail}”之后的下一个字符"},
    "next_char.probability": {"en": "probability", "zh": "概率"},
    "next_char.kept": {"en": "can be drawn: its probability after temperature and top-k",
                       "zh": "可被抽中：经过温度和 top-k 之后的概率"},
    "next_char.dropped": {"en": "dropped: its probability before the cut", "zh": "被截掉：截断之前的概率"},
    "next_char.prompt": {"en": "prompt: {tail}", "zh": "提示：{tail}"},
    "next_char.no_cut": {"en": "no top-k cut", "zh": "不做 top-k 截断"},
    "next_char.cut": {"en": "top-k = {k}", "zh": "top-k = {k}"},
    "next_char.summary": {
        "en": "temperature {temperature:g}, {cut}: {count:,} of the {vocab:,} characters can be drawn, holding {kept_mass:.1%} "
        "of the probability at this temperature; the most likely, “{best}”, is drawn with probability {p:.1%}.",
        "zh": "温度 {temperature:g}，{cut}：{vocab:,} 个字符中有 {count:,} 个可被抽中，它们在这个温度下共占 {kept_mass:.1%} "
        "的概率；最可能的“{best}”被抽中的概率为 {p:.1%}。",
    },
    "next_char.greedy": {
        "en": "temperature 0: nothing is drawn; every step takes the most likely character (greedy decoding), here “{best}”.",
        "zh": "温度 0：不再抽样，每一步都取最可能的字符（贪心解码），这里是“{best}”。",
    },
    "next_char.sampled_text": {"en": "{n} characters sampled after the prompt with seed {seed} (KV cache):",
                               "zh": "用随机种子 {seed} 在提示之后采样的 {n} 个字符（KV 缓存）："},
    "next_char.greedy_text": {"en": "{n} characters written greedily after the prompt (KV cache):",
                              "zh": "在提示之后贪心生成的 {n} 个字符（KV 缓存）："},
    # what the benchmarks measured, and measuring on a GPU in a lesson (course_utils.measured)
    "measured.provenance": {
        "en": "Measured on the {name} with torch {torch} on {date} (course_utils/results/{file}).",
        "zh": "测量环境：{name}，torch {torch}，{date}（course_utils/results/{file}）。",
    },
    "measured.none": {
        "en": "No {device} result of this benchmark is committed yet (course_utils/results/{file} does not exist): "
        "`make bench` on a machine with a {device} GPU writes it.",
        "zh": "这项基准测试还没有提交 {device} 上的结果（course_utils/results/{file} 不存在）："
        "在有 {device} GPU 的机器上运行 `make bench` 即可生成。",
    },
    "measured.no_gpu": {
        "en": "No GPU in this runtime, so this cell measured nothing more (on Colab: Runtime › Change runtime type › "
        "a GPU, then run the lesson again).",
        "zh": "当前运行环境没有 GPU，所以这个单元没有再测量什么（在 Colab 上：代码执行程序 › 更改运行时类型 › "
        "选一种 GPU，再重新运行本课）。",
    },
    "measured.on_gpu": {"en": "Measured now on this runtime's GPU, {device}:", "zh": "刚刚在当前运行环境的 GPU（{device}）上测得："},
    # claims: facts a cell demonstrates (course_utils.claims)
    "claim.false": {
        "en": "This notebook states a fact that is false on this run: {statement}",
        "zh": "本笔记本陈述的一条事实在这次运行中不成立：{statement}",
    },
    "claim.not_boolean": {
        "en": "claim: argument 'holds' got {got}; needs True or False (a bool, or a one-element bool tensor).",
        "zh": "claim：参数 holds 收到 {got}；需要 True 或 False（bool，或只含一个元素的布尔张量）。",
    },
    # input validation
    "error.argument": {
        "en": "{function}: argument '{argument}' got {got}; needs {needed}.",
        # no space after 收到/需要: validation.fail adds one only before a Latin letter, digit or symbol
        "zh": "{function}：参数 {argument} 收到{got}；需要{needed}。",
    },
    "error.language": {
        "en": "setup: argument 'lang' got {got!r}; needs one of {known}.",
        "zh": "setup：参数 lang 收到 {got!r}；应为以下之一：{known}。",
    },
    # lesson 10's training script (course_utils.train_gpt): what it prints while it trains
    "gpt.progress": {
        "en": "step {step}/{steps}: train loss {train:.3f}, val loss {val:.3f} ({seconds:.0f} s)",
        "zh": "第 {step}/{steps} 步：训练损失 {train:.3f}，验证损失 {val:.3f}（{seconds:.0f} 秒）",
    },
    "gpt.saved": {
        "en": "checkpoint written: {path} (step {step})",
        "zh": "检查点已写入：{path}（第 {step} 步）",
    },
}


def set_language(lang):
    """Make `lang` ("en" or "zh") the language of every later message."""
    global _current
    if lang not in LANGUAGES:
        raise ValueError(message("error.language", got=lang, known=", ".join(LANGUAGES)))
    _current = lang


def language():
    """The language messages are written in now."""
    return _current


def message(key, **fields):
    """The catalogue entry `key` in the current language, with `fields` filled in."""
    return MESSAGES[key][_current].format(**fields)


def text(lang, key, **fields):
    """The catalogue entry `key` in `lang` (not the current language: for threads that each write
    in a language of their own, such as the grader's), with `fields` filled in."""
    return MESSAGES[key][lang].format(**fields)


def pick(texts):
    """From a {"en": ..., "zh": ...} dict (e.g. a mistake's hint), the text in the current language."""
    return texts[_current]
