"""Plain-text mathematics in names and labels, as matplotlib mathtext.

Models describe their parameters and variables in plain text (``relative scale: a_k^2 -
||w_k||^2 = delta``); figures show the mathematics typeset: ``relative scale:
$a_k^2-\\|w_k\\|^2=\\delta$``. The conversion is deliberately narrow: a word becomes
mathematics only when it is a Greek letter's name (optionally with a subscript, a prime-like
``*`` or a power: ``tau``, ``eta_a``, ``beta0``, ``beta*``, ``tau^2``), a symbol with a
subscript or power (``a_k``, ``w_k^2``, ``x^2``) or a norm of one (``||w_k||^2``, ``|a_k|``);
runs of such words joined by ``-``, ``+``, ``=`` become one formula. Everything else is left
as it is, ``$`` in the text is escaped, and a result that mathtext cannot parse falls back to
the plain text, so a label can never break a figure.
"""

from __future__ import annotations

import functools
import re

GREEK = (
    "alpha beta gamma delta epsilon zeta eta theta iota kappa lambda mu nu xi pi rho sigma tau "
    "upsilon phi chi psi omega Gamma Delta Theta Lambda Xi Pi Sigma Phi Psi Omega"
).split()

_GREEK = "|".join(sorted(GREEK, key=len, reverse=True))
_SUB = r"(?:_\{?[A-Za-z0-9]+\}?|\d+)"
_POW = r"(?:\^(?:\d+|\*|\{[^}]*\}))"
_GREEK_WORD = re.compile(rf"^({_GREEK})({_SUB})?(\*)?({_POW})?$")
_SYMBOL = re.compile(rf"^([A-Za-z])({_SUB})?(\*)?({_POW})?$")
_NORM = re.compile(rf"^(\|\|?)([A-Za-z]+)({_SUB})?(\|\|?)({_POW})?$")
_OPERATORS = {"-": "-", "+": "+", "=": "=", "−": "-", "/": "/", "·": r"\cdot{}"}
_TRAIL = re.compile(r"^(.*?)([,.;:)]*)$")
_LEAD = re.compile(r"^([(]*)(.*)$")


def _sub(text: str | None) -> str:
    if not text:
        return ""
    body = text[1:] if text.startswith("_") else text
    return "_{" + body.strip("{}") + "}"


def _pow(text: str | None) -> str:
    if not text:
        return ""
    body = text[1:].strip("{}")
    return "^{" + body + "}"


def _base(name: str) -> str:
    return "\\" + name if name in GREEK else name


def _word(word: str) -> str | None:
    """The mathtext (without ``$``) of one word, or None when it is not mathematics."""
    m = _GREEK_WORD.match(word)
    if m:
        star = "^*" if m.group(3) else ""
        return _base(m.group(1)) + _sub(m.group(2)) + star + _pow(m.group(4))
    m = _SYMBOL.match(word)
    if m and (m.group(2) or m.group(4) or m.group(3)):
        star = "^*" if m.group(3) else ""
        return m.group(1) + _sub(m.group(2)) + star + _pow(m.group(4))
    m = _NORM.match(word)
    if m and len(m.group(1)) == len(m.group(4)):
        bar = r"\|" if len(m.group(1)) == 2 else "|"
        return bar + _base(m.group(2)) + _sub(m.group(3)) + bar + _pow(m.group(5))
    return None


@functools.lru_cache(maxsize=1024)
def _parses(math: str) -> bool:
    from matplotlib.mathtext import MathTextParser

    try:
        MathTextParser("path").parse(f"${math}$")
    except (ValueError, RuntimeError):
        return False
    return True


PHRASES: tuple[tuple[str, str], ...] = (
    (r"max_k |M_k(t) - M_k(0)|_F / |M_k(0)|_F",
     r"$\max_k \|M_k(t)-M_k(0)\|_F / \|M_k(0)\|_F$"),
    (r"||theta_t - theta_0|| / ||theta_0||",
     r"$\|\theta_t-\theta_0\| / \|\theta_0\|$"),
    (r"||theta_t - theta_0||_2", r"$\|\theta_t-\theta_0\|_2$"),
    (r"M_k = a_k^2 I + w_k w_k^T", r"$M_k = a_k^2 I + w_k w_k^\top$"),
    (r"nu = w^T beta* / a", r"$\nu = w^\top\beta^* / a$"),
    (r"upsilon = a / w^T beta*", r"$\upsilon = a / w^\top\beta^*$"),
    (r"w^T beta*", r"$w^\top\beta^*$"),
    (r"max_k <v̄_k, e_p>²", r"$\max_k \langle\bar v_k, e_p\rangle^2$"),
    (r"|a_k| |w_k|", r"$|a_k|\,\|w_k\|$"),
    (r"S(0,t)", r"$S(0,t)$"),
    (r"S(0, t)", r"$S(0, t)$"),
    (r"(1/n) sum (f-y)^2", r"$(1/n)\sum (f-y)^2$"),
    (r"cos(w, beta*)", r"$\cos(w, \beta^*)$"),
    (r"sqrt(k) = 4 alpha (1+s^2)/(1-s^2)", r"$\sqrt{k} = 4\alpha(1+s^2)/(1-s^2)$"),
    (r"|Xw - y|^2", r"$\|Xw-y\|^2$"),
    (r"1/2 |X beta - y|^2", r"$\frac{1}{2}\|X\beta-y\|^2$"),
    (r"eta_w a^2 - eta_a |w|^2", r"$\eta_w a^2-\eta_a\|w\|^2$"),
    (r"|w - beta*|^2", r"$\|w-\beta^*\|^2$"),
    (r"|w - w_implicit| / |w_implicit|", r"$\|w-w_{implicit}\| / \|w_{implicit}\|$"),
)
"""Whole formulas the word-by-word conversion cannot see (they span words with brackets):
replaced as they are, before the rest of the text is converted."""


def to_mathtext(text: str) -> str:
    """``text`` with its plain-text mathematics as mathtext (see the module docstring)."""
    for plain, typeset in PHRASES:
        if plain in text:
            head, _, tail = text.partition(plain)
            return f"{to_mathtext(head) if head else ''}{typeset}" \
                f"{to_mathtext(tail) if tail else ''}"
    words = text.replace("$", r"\$").split(" ")
    pieces: list[tuple[str, bool]] = []  # (text, is mathematics)
    for word in words:
        lead, rest = _LEAD.match(word).groups()  # type: ignore[union-attr]
        core, trail = _TRAIL.match(rest).groups()  # type: ignore[union-attr]
        math = _word(core) if core else None
        if math is None and core in _OPERATORS and not lead and not trail:
            pieces.append((core, False))
            continue
        if math is None:
            pieces.append((word, False))
            continue
        if lead:
            pieces.append((lead, False))
        pieces.append((math, True))
        if trail:
            pieces.append((trail, False))
    out: list[str] = []
    i = 0
    while i < len(pieces):
        text_i, is_math = pieces[i]
        if not is_math:
            out.append(text_i)
            i += 1
            continue
        formula = text_i
        j = i + 1
        while (
            j + 1 < len(pieces)
            and not pieces[j][1]
            and pieces[j][0] in _OPERATORS
            and pieces[j + 1][1]
        ):
            formula += _OPERATORS[pieces[j][0]] + pieces[j + 1][0]
            j += 2
        out.append(f"${formula}$" if _parses(formula) else text_i)
        i = j if _parses(formula) else i + 1
    return _join(out, pieces)


def _join(out: list[str], pieces: list[tuple[str, bool]]) -> str:
    """Join the converted pieces with spaces, but glue punctuation back to its word."""
    text = " ".join(out)
    text = re.sub(r" ([,.;:)]+)", r"\1", text)
    return re.sub(r"([(]+) ", r"\1", text)


def symbol(name: str) -> str | None:
    """The mathtext of a parameter's name when it is a Greek letter (``tau`` → ``$\\tau$``,
    ``eta_a`` → ``$\\eta_{a}$``, ``sigma0`` → ``$\\sigma_{0}$``), else None."""
    m = _GREEK_WORD.match(name)
    if not m or m.group(4):
        return None
    math = _base(m.group(1)) + _sub(m.group(2)) + ("^*" if m.group(3) else "")
    return f"${math}$" if _parses(math) else None
