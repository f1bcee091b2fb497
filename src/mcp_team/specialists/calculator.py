"""`calculate`: safe arithmetic over an AST whitelist (no eval), with size limits."""

from __future__ import annotations

import ast
import math
import operator
import warnings
from collections.abc import Callable
from typing import Any

from mcp_team.specialists.tools import Tool, ToolFailed

_BINARY: dict[type[ast.operator], Callable[[Any, Any], Any]] = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.Div: operator.truediv,
    ast.FloorDiv: operator.floordiv,
    ast.Mod: operator.mod,
    ast.Pow: operator.pow,
}
_UNARY: dict[type[ast.unaryop], Callable[[Any], Any]] = {ast.UAdd: operator.pos, ast.USub: operator.neg}
_FUNCTIONS: dict[str, Callable[..., float]] = {
    "sqrt": math.sqrt,
    "log": math.log,
    "log10": math.log10,
    "exp": math.exp,
    "abs": abs,
    "round": round,
    "min": min,
    "max": max,
    "sin": math.sin,
    "cos": math.cos,
    "tan": math.tan,
}
_CONSTANTS = {"pi": math.pi, "e": math.e}
MAX_EXPRESSION = 500
MAX_EXPONENT = 1000
MAX_MAGNITUDE = 1e300


def evaluate(expression: str) -> float | int:
    """Evaluate arithmetic; raise `ToolFailed` naming what is not allowed."""
    if len(expression) > MAX_EXPRESSION:
        raise ToolFailed(f"expression is {len(expression)} characters; the limit is {MAX_EXPRESSION}")
    try:
        # A string literal in the expression may hold an escape Python warns about (`"\\("`, written by a model): the
        # warning went to the server's stderr; the literal is refused below either way.
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", (SyntaxWarning, DeprecationWarning))
            tree = ast.parse(expression.strip().replace("^", "**"), mode="eval")
    except SyntaxError as exc:
        raise ToolFailed(f"not an arithmetic expression: {exc.msg}{_percent_hint(expression)}") from None
    try:
        return _eval(tree.body)
    except ToolFailed as exc:
        raise ToolFailed(f"{exc}{_percent_hint(expression)}") from None
    except ZeroDivisionError:
        raise ToolFailed("division by zero") from None
    except (OverflowError, ValueError) as exc:
        raise ToolFailed(f"cannot compute: {exc}") from None
    except TypeError as exc:
        raise ToolFailed(f"wrong arguments: {exc}") from None
    except RecursionError:
        raise ToolFailed("the expression is nested too deeply") from None


def _percent_hint(expression: str) -> str:
    """A hint for an expression that uses `%` as a percentage (`15% of 240`): here it is the remainder, and
    models that write percentages that way take the bare error for a dead end."""
    if "%" not in expression:
        return ""
    return "; % is the remainder of a division: write a percentage as a fraction (20% of 50 is 20/100*50)"


def _eval(node: ast.expr) -> Any:
    if isinstance(node, ast.Constant) and type(node.value) in (int, float):
        return _check(node.value)
    if isinstance(node, ast.Name) and node.id in _CONSTANTS:
        return _CONSTANTS[node.id]
    if isinstance(node, ast.BinOp) and type(node.op) in _BINARY:
        left, right = _eval(node.left), _eval(node.right)
        if isinstance(node.op, ast.Pow) and abs(right) > MAX_EXPONENT:
            raise ToolFailed(f"exponent {right} is too large (limit {MAX_EXPONENT})")
        return _check(_BINARY[type(node.op)](left, right))
    if isinstance(node, ast.UnaryOp) and type(node.op) in _UNARY:
        return _check(_UNARY[type(node.op)](_eval(node.operand)))
    if (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Name)
        and node.func.id in _FUNCTIONS
        and not node.keywords
    ):
        return _check(_FUNCTIONS[node.func.id](*(_eval(arg) for arg in node.args)))
    allowed = "numbers, + - * / // % ** ^, parentheses, " + ", ".join(sorted(_FUNCTIONS)) + ", pi, e"
    raise ToolFailed(f"'{ast.unparse(node)}' is not allowed; use only {allowed}")


def _check(value: Any) -> Any:
    if isinstance(value, complex):
        raise ToolFailed("the result is a complex number")
    if (isinstance(value, float) and not math.isfinite(value)) or abs(value) > MAX_MAGNITUDE:
        raise ToolFailed("the result is too large (or not a finite number)")
    return value


async def _run(args: dict[str, Any]) -> str:
    expression = args.get("expression")
    if not isinstance(expression, str):
        raise ToolFailed('\'expression\' must be a string, e.g. {"expression": "12*(3+4)/2"}')
    result = evaluate(expression)
    if isinstance(result, float) and result.is_integer() and abs(result) < 1e15:
        result = int(result)
    return f"{expression} = {result}"


CALCULATE = Tool(
    name="calculate",
    description="Evaluate an arithmetic expression exactly (+ - * / // % ** and sqrt, log, exp, min, max, round).",
    input_schema={
        "type": "object",
        "properties": {"expression": {"type": "string", "description": "e.g. 12*(3+4)/2"}},
        "required": ["expression"],
    },
    run=_run,
    read_only=True,
)
