"""Spark LIKE patterns: tokenizing with an escape character, and the shapes they reduce to.

A pattern is a sequence of literal characters, ``%`` (any run) and ``_``
(one character). Spark rejects an escape character followed by anything but
``%``, ``_`` or itself, and an escape at the end; so do we. Patterns are
re-rendered with backslash escapes, so ``ESCAPE '!'`` and ``\\`` spellings of
the same pattern get one canonical form.
"""

from __future__ import annotations

from dataclasses import dataclass

from lakelayout.errors import PredicateError

ANY = "%"
ONE = "_"


@dataclass(frozen=True)
class Token:
    """One pattern element: a wildcard (``%`` / ``_``) or a literal character."""

    char: str
    wildcard: bool


def tokenize(pattern: str, escape: str = "\\") -> list[Token]:
    """Split a LIKE pattern into tokens, resolving the escape character.

    >>> [t.char + ("*" if t.wildcard else "") for t in tokenize("a\\\\%_")]
    ['a', '%', '_*']
    """
    if len(escape) != 1:
        raise PredicateError(f"LIKE escape must be a single character, got {escape!r}")
    tokens: list[Token] = []
    i = 0
    while i < len(pattern):
        ch = pattern[i]
        if ch == escape:
            if i + 1 == len(pattern):
                raise PredicateError(
                    f"invalid LIKE pattern {pattern!r}: the escape character cannot end it"
                )
            nxt = pattern[i + 1]
            if nxt not in (ANY, ONE, escape):
                raise PredicateError(
                    f"invalid LIKE pattern {pattern!r}: the escape character cannot precede {nxt!r}"
                )
            tokens.append(Token(nxt, wildcard=False))
            i += 2
            continue
        tokens.append(Token(ch, wildcard=ch in (ANY, ONE)))
        i += 1
    return tokens


def render(tokens: list[Token]) -> str:
    """Canonical pattern text with backslash escapes (also Arrow's ``match_like`` syntax)."""
    out = []
    for t in tokens:
        if not t.wildcard and t.char in (ANY, ONE, "\\"):
            out.append("\\" + t.char)
        else:
            out.append(t.char)
    return "".join(out)


@dataclass(frozen=True)
class Shape:
    """What a pattern means: kind is ``equals``, ``prefix``, ``suffix``, ``any`` or ``like``."""

    kind: str
    text: str


def shape(tokens: list[Token]) -> Shape:
    """Classify a tokenized pattern.

    ``abc`` -> equals, ``abc%`` (``%%`` alike) -> prefix, ``%abc`` -> suffix, ``%`` -> any
    non-null string, everything else stays a LIKE.

    >>> shape(tokenize("ab%")), shape(tokenize("%")).kind
    (Shape(kind='prefix', text='ab'), 'any')
    """
    wild = [i for i, t in enumerate(tokens) if t.wildcard]
    literal = "".join(t.char for t in tokens if not t.wildcard)
    if not wild:
        return Shape("equals", literal)
    if any(tokens[i].char == ONE for i in wild):
        return Shape("like", render(tokens))
    if len(wild) == len(tokens):
        return Shape("any", "")
    n = len(tokens)
    if wild == list(range(n - len(wild), n)):
        return Shape("prefix", literal)
    if wild == list(range(len(wild))):
        return Shape("suffix", literal)
    return Shape("like", render(tokens))


def like_prefix(pattern: str, escape: str = "\\") -> tuple[str, bool] | None:
    """The literal text before the first wildcard of a LIKE pattern, and whether there is none.

    ``None`` for a malformed escape (Spark rejects those; pruning just keeps).

    >>> like_prefix("ab%c"), like_prefix("a\\\\_b"), like_prefix("%x"), like_prefix("a\\\\q")
    (('ab', False), ('a_b', True), ('', False), None)
    """
    out: list[str] = []
    chars = iter(pattern)
    for ch in chars:
        if ch == escape:
            following = next(chars, None)
            if following is None or following not in (ANY, ONE, escape):
                return None
            out.append(following)
        elif ch in (ANY, ONE):
            return "".join(out), False
        else:
            out.append(ch)
    return "".join(out), True


def escape_like(text: str) -> str:
    """``text`` as a LIKE pattern matching only itself (backslash escapes)."""
    return "".join("\\" + ch if ch in (ANY, ONE, "\\") else ch for ch in text)
