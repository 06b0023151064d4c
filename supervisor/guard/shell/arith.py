"""Arithmetic contexts: which ones are provably harmless, their value, and the builtins that
evaluate a name or an expression (and so may run a $(...) hidden in a variable's value)."""

from __future__ import annotations

import re
from collections.abc import Sequence

from supervisor.guard.shell.expand import Field
from supervisor.guard.shell.syntax import Word

# Bash evaluates a name inside arithmetic as an expression of its own, and an array subscript
# in that expression expands $(...): x='a[$(cmd)]'; echo $((x)) runs cmd. Without names, $,
# quotes or backquotes nothing can run, so only numbers and operators are harmless.
_HARMLESS = re.compile(r"(?:\s|\d+#[0-9A-Za-z@_]+|0[xX][0-9A-Fa-f]+|\d+|[-+*/%<>=!&|^~?:(),])*")
_TOKEN = re.compile(r"\s*(\d+#[0-9A-Za-z@_]+|0[xX][0-9A-Fa-f]+|\d+|\*\*|<<|>>|<=|>=|==|!=|&&|"
                    r"\|\||[-+*/%<>!&|^~?:(),])")
_SAFE_SUBSCRIPT = re.compile(r"\d+|@|\*")
_SUBSCRIPTED = re.compile(r"([A-Za-z_][A-Za-z0-9_]*)\[")
_NUMERIC_PARAMS = frozenset({"$#", "$?", "$$", "$!"})  # always a number (or empty: 0)
_COMPARE = frozenset({"-eq", "-ne", "-lt", "-le", "-gt", "-ge"})
_BITS = 64
_LEVELS = (  # binary operators from the loosest to the tightest
    ("||",), ("&&",), ("|",), ("^",), ("&",), ("==", "!="), ("<", "<=", ">", ">="),
    ("<<", ">>"), ("+", "-"), ("*", "/", "%"),
)
_HIDDEN = "can run commands hidden in variables"


class _Bad(Exception):
    pass


def harmless(expr: str) -> bool:
    """Only numbers and operators: evaluating it can neither run a command nor set a variable."""
    return _HARMLESS.fullmatch(expr) is not None


def _wrap(n: int) -> int:
    n &= (1 << _BITS) - 1
    return n - (1 << _BITS) if n >> (_BITS - 1) else n


def _number(text: str) -> int:
    if "#" in text:
        base_text, digits = text.split("#", 1)
        base = int(base_text)
        if not 2 <= base <= 64:
            raise _Bad
        value = 0
        for ch in digits:
            if ch.isdigit():
                d = int(ch)
            elif ch.islower():
                d = ord(ch) - ord("a") + 10
            elif ch.isupper():
                d = ord(ch) - ord("A") + (36 if base > 36 else 10)
            else:
                d = 62 if ch == "@" else 63
            if d >= base:
                raise _Bad
            value = value * base + d
        return _wrap(value)
    if text[:2] in ("0x", "0X"):
        return _wrap(int(text[2:], 16))
    if len(text) > 1 and text.startswith("0"):
        if set(text) - set("01234567"):
            raise _Bad
        return _wrap(int(text, 8))
    return _wrap(int(text))


def _binary(op: str, a: int, b: int) -> int:
    if op in ("/", "%"):
        if b == 0:
            raise _Bad
        q = abs(a) // abs(b) * (1 if (a < 0) == (b < 0) else -1)  # C truncates toward zero
        return _wrap(q if op == "/" else a - q * b)
    if op in ("<<", ">>"):
        if not 0 <= b < _BITS:
            raise _Bad
        return _wrap(a << b if op == "<<" else a >> b)
    table = {
        "||": lambda: int(bool(a or b)), "&&": lambda: int(bool(a and b)),
        "|": lambda: a | b, "^": lambda: a ^ b, "&": lambda: a & b,
        "==": lambda: int(a == b), "!=": lambda: int(a != b), "<": lambda: int(a < b),
        "<=": lambda: int(a <= b), ">": lambda: int(a > b), ">=": lambda: int(a >= b),
        "+": lambda: a + b, "-": lambda: a - b, "*": lambda: a * b,
    }
    return _wrap(table[op]())


class _Eval:
    """Bash integer arithmetic over numbers and operators only (what harmless() accepts)."""

    def __init__(self, text: str) -> None:
        self.tokens: list[str] = []
        pos = 0
        while pos < len(text):
            if text[pos:].strip() == "":
                break
            m = _TOKEN.match(text, pos)
            if not m:
                raise _Bad
            self.tokens.append(m.group(1))
            pos = m.end()
        self.k = 0

    def peek(self) -> str:
        return self.tokens[self.k] if self.k < len(self.tokens) else ""

    def take(self, want: str | None = None) -> str:
        tok = self.peek()
        if not tok or (want is not None and tok != want):
            raise _Bad
        self.k += 1
        return tok

    def comma(self) -> int:
        value = self.ternary()
        while self.peek() == ",":
            self.take()
            value = self.ternary()
        return value

    def ternary(self) -> int:
        cond = self.binary(0)
        if self.peek() != "?":
            return cond
        self.take()
        yes = self.comma()
        self.take(":")
        no = self.ternary()
        return yes if cond else no

    def binary(self, level: int) -> int:
        if level == len(_LEVELS):
            return self.power()
        value = self.binary(level + 1)
        while self.peek() in _LEVELS[level]:
            op = self.take()
            value = _binary(op, value, self.binary(level + 1))
        return value

    def power(self) -> int:
        base = self.unary()
        if self.peek() != "**":
            return base
        self.take()
        exp = self.power()  # right-associative
        if exp < 0 or exp > 4096:
            raise _Bad
        return _wrap(pow(base, exp, 1 << _BITS))

    def unary(self) -> int:
        tok = self.peek()
        if tok in ("+", "-", "!", "~"):
            self.take()
            value = self.unary()
            return {"+": value, "-": _wrap(-value), "!": int(not value), "~": _wrap(~value)}[tok]
        if tok == "(":
            self.take()
            value = self.comma()
            self.take(")")
            return value
        if tok[:1].isdigit():
            return _number(self.take())
        raise _Bad


def evaluate(expr: str) -> int | None:
    """The value of a harmless expression, or None when bash would report an error."""
    if not harmless(expr):
        return None
    try:
        ev = _Eval(expr)
        if not ev.tokens:
            return 0
        value = ev.comma()
        return value if ev.k == len(ev.tokens) else None
    except (_Bad, ValueError, RecursionError):
        return None


def _clip(text: str, limit: int = 80) -> str:
    return text if len(text) <= limit else text[:limit - 1] + "…"


def expansion_hazard(opener: str, body: str, closer: str) -> str:
    kind = "arithmetic command" if opener == "((" else "arithmetic expansion"
    return f"{kind} {_clip(opener + body + closer)} {_HIDDEN}"


def param_hazard(text: str) -> str:
    """Why a ${...} other than a plain ${name} must be asked about, naming what it does."""
    inner = text[2:-1]
    shown = _clip(text)
    if inner.startswith("!"):
        return f"indirect expansion {shown} reads a variable named by a value; it {_HIDDEN}"
    m = re.match(r"#?[A-Za-z_][A-Za-z0-9_]*", inner)
    rest = inner[m.end():] if m else inner
    if rest.startswith("[") and not safe_subscript(rest[1:rest.find("]")]):
        return f"array subscript in {shown} is arithmetic: it {_HIDDEN}"
    if rest.startswith("@P"):
        return f"prompt expansion {shown} runs $(...) found in the variable's value"
    if rest.startswith(":") and rest[1:2] not in ("-", "=", "+", "?"):
        return f"substring offset in {shown} is arithmetic: it {_HIDDEN}"
    if rest[:2] in (":=", "=") or rest[:1] == "=":
        return f"{shown} assigns a variable"
    if not m:  # ${1}, ${@:2}, ${#}: positional and special parameters
        if ":" in inner:
            return f"substring offset in {shown} is arithmetic: it {_HIDDEN}"
    return f"cannot tell what this expansion does: {shown}"


def safe_subscript(sub: str) -> bool:
    return _SAFE_SUBSCRIPT.fullmatch(sub.strip()) is not None or (
        harmless(sub) and evaluate(sub) is not None)


def _name_ok(field: Field) -> bool:
    """A variable name a builtin will look up or set: safe unless it has a real subscript."""
    if field.unresolved:
        return False
    m = _SUBSCRIPTED.match(field.text)
    if m is None:
        return True
    end = field.text.find("]", m.end())
    return end > 0 and safe_subscript(field.text[m.end():end])


def _operand_ok(field: Field) -> bool:
    if field.text in _NUMERIC_PARAMS:
        return True
    return not field.unresolved and harmless(field.text)


def _options(args: Sequence[Field], with_value: str) -> tuple[str, list[Field], dict[str, Field]]:
    """Short options (letters), the operands after them, and the values of with_value options."""
    letters, values, i = "", {}, 0
    while i < len(args) and args[i].text.startswith("-") and len(args[i].text) > 1:
        text = args[i].text
        if text == "--" or args[i].unresolved:
            i += text == "--"
            break
        for j, ch in enumerate(text[1:], start=1):
            letters += ch
            if ch in with_value:
                if text[j + 1:]:
                    values[ch] = Field(text[j + 1:])
                elif i + 1 < len(args):
                    i += 1
                    values[ch] = args[i]
                break
        i += 1
    return letters, list(args[i:]), values


def _declare_hazards(name: str, args: Sequence[Field]) -> list[str]:
    letters, operands, _ = _options(args, "")
    if any(a.unresolved and a.text.startswith(("$", "-")) for a in args):
        bad = next(a for a in args if a.unresolved)
        return [f"cannot tell what {name} {_clip(bad.text)} sets: an option or subscript in it"
                f" {_HIDDEN}"]
    if ("i" in letters or "n" in letters) and name != "export":
        what = ("evaluates every value given to the variable as arithmetic" if "i" in letters
                else "makes a name refer to another variable, perhaps with a subscript that")
        return [f"{name} -{'i' if 'i' in letters else 'n'} {what}: it {_HIDDEN}"]
    for a in operands:
        target, eq, value = a.text.partition("=")
        if not _name_ok(Field(target.removesuffix("+"))) or "$" in target:
            return [f"{name} {_clip(a.text)} evaluates an array subscript: it {_HIDDEN}"]
        if eq and (value.startswith("(") or (a.unresolved and name != "export")):
            # declare -a x='([$(cmd)]=1)' is a compound assignment, with subscripts
            return [f"{name} {_clip(a.text)} may assign array elements whose subscripts are "
                    f"arithmetic: it {_HIDDEN}"]
    return []


def builtin_hazards(name: str, args: Sequence[Field]) -> list[str]:
    """Builtins that evaluate an argument as arithmetic or as a (subscripted) variable name."""
    found: list[str] = []
    if name == "let":
        found += [f"let evaluates {_clip(a.text)} as arithmetic: it {_HIDDEN}"
                  for a in args if not _operand_ok(a)][:1]
    elif name == "[[":
        found += _compare_hazards(args)
    if name in ("[[", "test", "[") and not found:
        for i, a in enumerate(args[:-1]):
            if a.text in ("-v", "-R") and not _name_ok(args[i + 1]):
                found.append(f"{name} -v {_clip(args[i + 1].text)} evaluates an array subscript: "
                             f"it {_HIDDEN}")
    if name in ("declare", "typeset", "local", "readonly", "export"):
        found += _declare_hazards(name, args)
    elif name == "printf":
        _, _, values = _options(args, "v")
        if "v" in values and not _name_ok(values["v"]):
            found.append(f"printf -v {_clip(values['v'].text)} sets a subscripted variable: "
                         f"it {_HIDDEN}")
    elif name in ("read", "mapfile", "readarray", "unset", "getopts", "wait"):
        found += _read_hazards(name, args)
    return found


def _compare_hazards(args: Sequence[Field]) -> list[str]:
    """[[ a -eq b ]]: both operands of an arithmetic comparison are evaluated as arithmetic."""
    found: list[str] = []
    for i, a in enumerate(args):
        if a.text in _COMPARE:
            bad = [b for b in (args[i - 1] if i else None, args[i + 1] if i + 1 < len(args)
                               else None) if b is not None and not _operand_ok(b)]
            if bad:
                found.append(f"[[ {a.text} ]] evaluates {_clip(bad[0].text)} as arithmetic: "
                             f"it {_HIDDEN}")
    return found


def _read_hazards(name: str, args: Sequence[Field]) -> list[str]:
    """Builtins that set the variables they are named (read, mapfile, unset, getopts, wait)."""
    found: list[str] = []
    with_value = {"read": "adinNptu", "wait": "p"}.get(name, "dnOsuCc")
    letters, operands, values = _options(args, with_value)
    if name in ("mapfile", "readarray") and "C" in values:
        found.append(f"{name} -C {_clip(values['C'].text)} runs a callback for every line")
    if name == "getopts":
        operands = operands[1:2]
    named = {"read": "a", "wait": "p"}.get(name, "")
    names = [*operands, *(values[k] for k in named if k in values)]
    found += [f"{name} {_clip(a.text)} sets a subscripted variable: it {_HIDDEN}"
              for a in names if not _name_ok(a)][:1]
    return found


def assigned_subscript(word: Word) -> tuple[str, str | None] | None:
    """a[i]=v or a[i]+=v: the array's name and the subscript (None when not only literal
    text); None when the word is not shaped like one."""
    first = word.parts[0] if word.parts else None
    if first is None or first.kind != "lit" or first.quoted:
        return None
    m = _SUBSCRIPTED.match(first.text)
    if m is None:
        return None
    raw = "".join(p.text if p.kind != "var" else f"${{{p.text}}}" for p in word.parts)
    depth, end = 0, -1
    for i in range(m.end() - 1, len(raw)):
        depth += {"[": 1, "]": -1}.get(raw[i], 0)
        if depth == 0:
            end = i
            break
    if end < 0 or not raw.startswith(("=", "+="), end + 1):
        return None
    literal = all(p.kind == "lit" for p in word.parts)
    return m.group(1), raw[m.end():end] if literal else None
