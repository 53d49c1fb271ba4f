"""MySQL's lexical rules for the DDL parser: identifiers, literals, comments, statements.

The parser only needs tokens, but MySQL's lexer has rules a generic SQL tokenizer gets wrong in
exactly the statements the binlog carries: backtick identifiers (with doubled backticks inside),
backslash escapes in strings, charset introducers (``_utf8mb4'x'``), bit and hex literals, and
*executable comments* (``/*!50100 PARTITION BY ...*/``, ``/*M!100100 ...*/``) whose content is
real SQL that ``SHOW CREATE TABLE`` and mysqldump emit.
"""

from __future__ import annotations

from dataclasses import dataclass

ID = "id"  # unquoted word (keywords are words too)
QID = "qid"  # `quoted identifier`
STR = "str"  # 'string' or "string", unescaped
NUM = "num"
HEX = "hex"  # x'0A' / 0x0A (value: the hex digits)
BITS = "bits"  # b'101' / 0b101 (value: the binary digits)
OP = "op"  # punctuation and operators
VAR = "var"  # @user_var, @@system_var

_ESCAPES = {"0": "\0", "b": "\b", "n": "\n", "r": "\r", "t": "\t", "Z": "\x1a"}
_WORD_START = set("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ_$")
_WORD = _WORD_START | set("0123456789")
_TWO_CHAR_OPS = {"<=", ">=", "<>", "!=", ":=", "||", "&&", "<<", ">>", "->"}


class LexError(ValueError):
    pass


@dataclass(frozen=True, slots=True)
class Token:
    kind: str
    value: str

    @property
    def upper(self) -> str:
        return self.value.upper() if self.kind == ID else ""

    def is_word(self, *words: str) -> bool:
        return self.kind == ID and self.value.upper() in words

    def is_op(self, op: str) -> bool:
        return self.kind == OP and self.value == op

    def sql(self) -> str:
        """The token as SQL text again (for defaults and expressions kept as text)."""
        if self.kind == QID:
            return "`" + self.value.replace("`", "``") + "`"
        if self.kind == STR:
            return "'" + self.value.replace("\\", "\\\\").replace("'", "''") + "'"
        if self.kind == HEX:
            return f"x'{self.value}'"
        if self.kind == BITS:
            return f"b'{self.value}'"
        return self.value


def _is_word_char(ch: str) -> bool:
    return ch in _WORD or ord(ch) >= 0x80


def tokenize(sql: str) -> list[Token]:
    out: list[Token] = []
    i, n = 0, len(sql)
    while i < n:
        ch = sql[i]
        if ch.isspace():
            i += 1
            continue
        if ch == "#" or (sql.startswith("--", i) and (i + 2 >= n or sql[i + 2] in " \t\r\n")):
            end = sql.find("\n", i)
            i = n if end < 0 else end + 1
            continue
        if sql.startswith("/*", i):
            end = sql.find("*/", i + 2)
            if end < 0:
                raise LexError("unterminated comment")
            body = sql[i + 2 : end]
            i = end + 2
            if body.startswith("!") or body.startswith("M!"):
                body = body[2:] if body.startswith("M!") else body[1:]
                j = 0
                while j < len(body) and body[j].isdigit():
                    j += 1
                out.extend(tokenize(body[j:]))
            continue
        if ch == "`":
            value, i = _quoted(sql, i, "`", escapes=False)
            out.append(Token(QID, value))
            continue
        if ch in "'\"":
            value, i = _quoted(sql, i, ch, escapes=True)
            out.append(Token(STR, value))
            continue
        if ch in "xXbB" and i + 1 < n and sql[i + 1] == "'":
            end = sql.find("'", i + 2)
            if end < 0:
                raise LexError("unterminated literal")
            out.append(Token(HEX if ch in "xX" else BITS, sql[i + 2 : end]))
            i = end + 1
            continue
        if ch == "0" and i + 1 < n and sql[i + 1] in "xXbB":
            j = i + 2
            while j < n and _is_word_char(sql[j]):
                j += 1
            digits = sql[i + 2 : j]
            out.append(Token(HEX if sql[i + 1] in "xX" else BITS, digits))
            i = j
            continue
        if ch.isdigit() or (ch == "." and i + 1 < n and sql[i + 1].isdigit()):
            j = i
            while j < n and (sql[j].isdigit() or sql[j] == "."):
                j += 1
            if j + 1 < n and sql[j] in "eE" and (sql[j + 1].isdigit() or sql[j + 1] in "+-"):
                j += 2
                while j < n and sql[j].isdigit():
                    j += 1
            if j < n and _is_word_char(sql[j]):  # identifiers may start with digits: 1abc
                while j < n and _is_word_char(sql[j]):
                    j += 1
                out.append(Token(ID, sql[i:j]))
            else:
                out.append(Token(NUM, sql[i:j]))
            i = j
            continue
        if ch == "@":
            j = i + 1
            while j < n and (sql[j] == "@" or _is_word_char(sql[j]) or sql[j] == "."):
                j += 1
            out.append(Token(VAR, sql[i:j]))
            i = j
            continue
        if _is_word_char(ch):
            j = i
            while j < n and _is_word_char(sql[j]):
                j += 1
            out.append(Token(ID, sql[i:j]))
            i = j
            continue
        two = sql[i : i + 2]
        if two in _TWO_CHAR_OPS:
            out.append(Token(OP, two))
            i += 2
            continue
        out.append(Token(OP, ch))
        i += 1
    return out


def _quoted(sql: str, i: int, quote: str, *, escapes: bool) -> tuple[str, int]:
    buf: list[str] = []
    j, n = i + 1, len(sql)
    while j < n:
        ch = sql[j]
        if ch == quote:
            if j + 1 < n and sql[j + 1] == quote:
                buf.append(quote)
                j += 2
                continue
            return "".join(buf), j + 1
        if escapes and ch == "\\" and j + 1 < n:
            nxt = sql[j + 1]
            buf.append(_ESCAPES.get(nxt, nxt if nxt not in "%_" else "\\" + nxt))
            j += 2
            continue
        buf.append(ch)
        j += 1
    raise LexError(f"unterminated {quote} quote")


def split_statements(sql: str) -> list[list[Token]]:
    """Statements separated by ``;`` (a history record may hold several)."""
    statements: list[list[Token]] = []
    current: list[Token] = []
    for tok in tokenize(sql):
        if tok.is_op(";"):
            if current:
                statements.append(current)
            current = []
        else:
            current.append(tok)
    if current:
        statements.append(current)
    return statements
