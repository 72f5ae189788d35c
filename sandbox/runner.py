"""Runs one program inside a freshly forked sandbox child (SPEC §2 semantics).

The program runs as the `__main__` module of file `main.py`, in-process (the child was
forked from a zygote that already imported numpy/scipy/sympy). The result record sent
back to the server holds only what the pipes cannot carry: the status, the value of a
last expression, the user-frame traceback and the exit code. The record is encoded with
functions captured before the program runs, so a program that replaces `json`, `print`
or builtins cannot corrupt it; the server still validates whatever arrives.
"""

from __future__ import annotations

import ast
import builtins
import linecache
import os
import pprint
import sys
import traceback
import types
from json.encoder import encode_basestring_ascii as _quote  # C function: immune to monkey-patching

from sandbox.feedback import Clip

USER_FILE = "main.py"

_write = os.write
_exit = os._exit
_getpid = os.getpid


def _user_only(te: traceback.TracebackException) -> traceback.TracebackException:
    """Drop frames outside main.py (the runner's, and library internals), chained ones too."""
    te.stack = traceback.StackSummary.from_list([f for f in te.stack if f.filename == USER_FILE])
    for chained in (te.__cause__, te.__context__):
        if chained is not None:
            _user_only(chained)
    return te


def _format_exception(exc: BaseException) -> str:
    try:
        te = traceback.TracebackException(type(exc), exc, exc.__traceback__, compact=True)
        return "".join(_user_only(te).format())
    except BaseException:  # e.g. MemoryError while formatting: keep at least the type
        return f"{type(exc).__name__}\n"


def _display(value: object) -> str:
    """IPython-like display: pretty-printed repr, dict order kept (IPython >= 8 does not sort)."""
    return pprint.pformat(value, width=79, sort_dicts=False)


def _split_last_expression(tree: ast.Module, code: str) -> tuple[ast.Module, ast.Expression | None]:
    """IPython shows the value of a final expression statement unless the cell ends with ';'."""
    if tree.body and isinstance(tree.body[-1], ast.Expr) and not code.rstrip().endswith(";"):
        last = ast.Expression(tree.body[-1].value)
        return ast.Module(tree.body[:-1], type_ignores=[]), last
    return tree, None


def _fresh_main() -> dict:
    module = types.ModuleType("__main__")
    module.__file__ = USER_FILE
    module.__builtins__ = builtins
    sys.modules["__main__"] = module
    sys.argv = [USER_FILE]
    return module.__dict__


def _restore(snapshot: dict) -> None:
    """Put back the builtins the program may have replaced (print, len, type...): the
    runner's own code needs them to report."""
    current = vars(builtins)
    current.clear()
    current.update(snapshot)


def run_program(code: str, keep_chars: int) -> dict:
    """Execute `code`; return the result record (status, exit_code, repr, traceback, note)."""
    record: dict = {"status": "ok", "exit_code": 0, "repr": None, "traceback": None, "note": None}
    linecache.cache[USER_FILE] = (len(code), None, code.splitlines(True), USER_FILE)
    namespace = _fresh_main()
    snapshot = dict(vars(builtins))
    value = None
    try:
        tree = ast.parse(code, USER_FILE)
        body, last = _split_last_expression(tree, code)
        exec(compile(body, USER_FILE, "exec"), namespace)
        if last is not None:
            value = eval(compile(last, USER_FILE, "eval"), namespace)
        _restore(snapshot)
        if value is not None:
            record["repr"] = Clip.of(_display(value), keep_chars).as_dict()  # may run the program's __repr__
    except SystemExit as exc:
        # Mirror the interpreter: None/0 is success, an int is the exit code, anything
        # else is printed to stderr and exits 1.
        _restore(snapshot)
        if exc.code is None or exc.code == 0:
            pass
        elif isinstance(exc.code, int):
            record.update(status="error", exit_code=exc.code)
        else:
            record.update(status="error", exit_code=1, note=str(exc.code))
    except BaseException as exc:
        _restore(snapshot)
        limit_hit = isinstance(exc, MemoryError)
        record.update(
            status="resource_limit" if limit_hit else "error",
            exit_code=1,
            traceback=Clip.of(_format_exception(exc), keep_chars).as_dict(),
            note="memory" if limit_hit else None,
        )
    _restore(snapshot)
    return record


def _encode(value: object) -> str:
    """JSON for the flat record (str, int, None, nested dicts) using captured C helpers only."""
    if value is None:
        return "null"
    if value is True or value is False:
        return "true" if value else "false"
    if type(value) is int:
        return int.__repr__(value)
    if type(value) is str:
        return _quote(value)
    if type(value) is dict:
        return "{" + ",".join(f"{_quote(k)}:{_encode(v)}" for k, v in value.items()) + "}"
    return "null"


def flush_streams() -> None:
    for stream in (sys.stdout, sys.stderr, sys.__stdout__, sys.__stderr__):
        try:
            stream.flush()
        except BaseException:  # the program may have closed or replaced them
            pass


def send_and_exit(record: dict, result_fd: int, owner_pid: int) -> None:
    """Send the record and leave without running atexit hooks or joining the program's threads."""
    if _getpid() != owner_pid:
        _exit(1)  # a process the program forked reached the end of the runner: stay silent
    flush_streams()
    body = _encode(record).encode("ascii")
    # Length-prefixed so the server need not wait for EOF, which only comes after this
    # process's exit has unmapped its copy of the zygote (milliseconds).
    data = len(body).to_bytes(8, "big") + body
    try:
        while data:
            data = data[_write(result_fd, data) :]
    except BaseException:
        _exit(3)
    _exit(0)
