"""A line-at-a-time N-Triples parser built for dump scale and for telling damage apart.

The common case (Freebase's ``<s>\\t<p>\\t<o>\\t.``, Wikidata's ``<s> <p> <o> .``, no escapes)
costs a ``split`` and a few string checks; everything else takes a regular-expression path.
A line that is not a triple raises :class:`BadLine`, whose message (``truncated line``,
``bad escape``, ``malformed IRI``, ...) is the reason the rejects file records. Terms come back
as strings (an IRI without brackets, a blank node as ``_:label``) or as :class:`Literal`.

>>> parse_triple('<http://a>\\t<http://p>\\t"Paris"@fr\\t.')
('http://a', 'http://p', Literal(value='Paris', datatype='', lang='fr'))
>>> parse_triple('<http://a> <http://p> <http://b> .')
('http://a', 'http://p', 'http://b')
>>> try:
...     parse_triple('<http://a>\\t<http://p>\\t<http://b>')
... except BadLine as error:
...     print(error)
missing terminator
"""
from __future__ import annotations

import re
from typing import NamedTuple

from localkg.loaders.rejects import NUL_REASON


class BadLine(ValueError):
    """A line that is not one N-Triples statement; the message is the reason."""


class Literal(NamedTuple):
    value: str
    datatype: str = ""
    lang: str = ""


_ESCAPE = re.compile(r"\\(?:([tbnrf\"'\\])|u([0-9A-Fa-f]{4})|U([0-9A-Fa-f]{8}))|\\")
_SIMPLE_ESCAPES = {"t": "\t", "b": "\b", "n": "\n", "r": "\r", "f": "\f", '"': '"', "'": "'", "\\": "\\"}
_LANG = re.compile(r"[A-Za-z]+(?:-[A-Za-z0-9]+)*")
# One term at the start of the text: IRI, blank node or literal (with its suffix).
_TERM = re.compile(
    r'<[^>\s]*>'
    r'|_:[A-Za-z0-9_][^\s]*?(?=[\s.]*$|\s)'
    r'|"(?:[^"\\\n\r]|\\.)*"(?:@[A-Za-z]+(?:-[A-Za-z0-9]+)*|\^\^<[^>\s]*>)?'
)
_GAP = re.compile(r"[ \t]*")
_LEXICAL = re.compile(r'(?:[^"\\]|\\.)*', re.S)


def unescape(text: str) -> str:
    """Resolve N-Triples escapes (``\\t``, ``\\"``, ``\\uXXXX`` …); a stray backslash is a bad escape."""
    if "\\" not in text:
        return text

    def replace(match: re.Match) -> str:
        simple, short, long = match.groups()
        if simple:
            return _SIMPLE_ESCAPES[simple]
        code = int(short or long or "-1", 16)
        if not 0 <= code <= 0x10FFFF or 0xD800 <= code <= 0xDFFF:
            raise BadLine("bad escape")
        return chr(code)

    return _ESCAPE.sub(replace, text)


def iri(term: str) -> str:
    """The IRI (or ``_:label`` blank node) written as ``term``; checked for the characters that
    show damage (space, quote, angle bracket, newline, NUL), not for full RFC 3987 syntax."""
    if term[:1] != "<" or term[-1:] != ">" or len(term) < 2:
        if term.startswith("_:") and len(term) > 2:
            if "\x00" in term:
                raise BadLine(NUL_REASON)
            return term
        raise BadLine("malformed term" if term else "truncated line")
    value = term[1:-1]
    if "\\" in value:
        value = unescape(value)
    if "\x00" in value:
        raise BadLine(NUL_REASON)
    if " " in value or '"' in value or "<" in value or ">" in value or "\n" in value:
        raise BadLine("malformed IRI")
    return value


_VALID_LANGS: set[str] = set()


def literal(term: str) -> Literal:
    """The literal written as ``term`` (which starts with a quote)."""
    close = term.rfind('"')
    if close <= 0:
        raise BadLine("truncated line")
    lexical, suffix = term[1:close], term[close + 1:]
    if '"' in lexical or "\\" in lexical:
        if _LEXICAL.fullmatch(lexical) is None:
            raise BadLine("bad escape" if "\\" in lexical else "unescaped quote in literal")
        lexical = unescape(lexical)
    if "\x00" in lexical:
        raise BadLine(NUL_REASON)
    if not suffix:
        return Literal(lexical)
    if suffix[0] == "@":
        lang = suffix[1:]
        if lang not in _VALID_LANGS:
            if _LANG.fullmatch(lang) is None:
                raise BadLine("malformed language tag")
            if len(_VALID_LANGS) < 10_000:
                _VALID_LANGS.add(lang)
        return Literal(lexical, "", lang)
    if suffix.startswith("^^<") and suffix.endswith(">"):
        return Literal(lexical, iri(suffix[2:]), "")
    raise BadLine("malformed literal suffix")


def term_value(term: str) -> str | Literal:
    """An object term: a literal, or an IRI / blank node."""
    if term[:1] == '"':
        return literal(term)
    return iri(term)


def split_triple(line: str) -> tuple[str, str, str]:
    """The three terms of a line (without its newline), unparsed; raises BadLine if it has no three
    terms and a final dot. Callers that drop most lines by predicate parse only what they keep."""
    parts = line.split("\t")
    if len(parts) == 4 and parts[3] == ".":
        return parts[0], parts[1], parts[2]
    parts = line.split(" ")
    if len(parts) == 4 and parts[3] == ".":
        return parts[0], parts[1], parts[2]
    return _split_general(line)


def parse_triple(line: str) -> tuple[str, str, str | Literal]:
    """Parse one line (without its newline) into (subject, predicate, object)."""
    subject, predicate, obj = split_triple(line)
    return iri(subject), iri(predicate), term_value(obj)


def _split_general(line: str) -> tuple[str, str, str]:
    """The slow path: any spacing, literals with spaces or tabs; diagnoses what is wrong."""
    if not line.strip():
        raise BadLine("blank line")
    terms: list[str] = []
    position = _GAP.match(line).end()
    while len(terms) < 3:
        if position >= len(line):
            raise BadLine("truncated line")
        match = _TERM.match(line, position)
        if match is None:
            raise BadLine(_diagnose(line[position:]))
        terms.append(match.group())
        position = _GAP.match(line, match.end()).end()
        if len(terms) < 3 and position == match.end() and position < len(line):
            raise BadLine("malformed term")
    rest = line[position:].rstrip()
    if not rest:
        raise BadLine("missing terminator")
    if rest[0] != "." or (rest[1:].strip() and not rest[1:].strip().startswith("#")):
        raise BadLine("text after the object")
    return terms[0], terms[1], terms[2]


def _diagnose(text: str) -> str:
    """Why no term starts here: cut off, a bad escape, or something else."""
    if text[0] == "<":
        return "truncated line" if ">" not in text else "malformed IRI"
    if text[0] == '"':
        body = text[1:]
        if re.match(r'(?:[^"\\\n\r]|\\.)*"', body) is None:
            return "truncated line"
        return "malformed literal suffix"
    return "malformed term"
