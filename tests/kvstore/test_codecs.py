"""Key codecs: vectors derived by hand from orbit.go ``kvcodec`` and property tests (round trip;
a key matches a filter exactly when its stored key matches the stored filter)."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import jetstream
from kvstore import (
    Base64KeyCodec,
    ChainKeyCodec,
    FilterableKeyCodec,
    FilterNotSupportedError,
    InvalidKeyError,
    KeyCodec,
    KeyDecodeError,
    NoOpKeyCodec,
    PathKeyCodec,
    validate_filter,
    validate_key,
)
from kvstore._codecs import encode_filter

# -- hand-derived vectors ----------------------------------------------------------------------
#
# orbit.go kvcodec/base64_codec.go EncodeKey: strings.Split(key, "."), each token
# base64.RawURLEncoding (alphabet A-Z a-z 0-9 - _, no '=' padding), joined with ".".
#
# "Acme Inc" = 41 63 6d | 65 20 49 | 6e 63
#   41 63 6d = 010000 010110 001101 101101 = 16 22 13 45 = Q W N t
#   65 20 49 = 011001 010010 000001 001001 = 25 18 1 9   = Z S B J
#   6e 63    = 011011 100110 0011(00)      = 27 38 12    = b m M     (2 bytes: 3 chars, no pad)
# "contact" = 63 6f 6e | 74 61 63 | 74
#   63 6f 6e = 011000 110110 111101 101110 = 24 54 61 46 = Y 2 9 u
#   74 61 63 = 011101 000110 000101 100011 = 29 6 5 35   = d G F j
#   74       = 011101 00(0000)             = 29 0        = d A
# "~~~" = 7e 7e 7e = 011111 100111 111001 111110 = 31 39 57 62 = f n 5 -   (URL alphabet: '-')
# "???" = 3f 3f 3f = 001111 110011 111100 111111 = 15 51 60 63 = P z 8 _   (URL alphabet: '_')
# "é"   = c3 a9    = 110000 111010 1001(00)      = 48 58 36    = w 6 k     (UTF-8 bytes)
# "a" = 61 = 011000 01(0000) = Y Q ; "b" = 62 = 011000 10(0000) = Y g
# "_root_" = 5f 72 6f | 6f 74 5f
#   5f 72 6f = 010111 110111 001001 101111 = 23 55 9 47  = X 3 J v
#   6f 74 5f = 011011 110111 010001 011111 = 27 55 17 31 = b 3 R f
BASE64_VECTORS = [
    ("Acme Inc.contact", "QWNtZSBJbmM.Y29udGFjdA"),
    ("~~~", "fn5-"),
    ("???", "Pz8_"),
    ("é", "w6k"),
    ("a.b", "YQ.Yg"),
    ("*", "Kg"),  # in a key, '*' is a literal token: 2a = 001010 10(0000) = K g
]

# orbit.go kvcodec/path_codec.go EncodeKey: "/" alone -> "_root_"; a leading "/" -> "_root_."
# prefix; strings.TrimSuffix(key, "/") (one trailing slash); then every "/" -> ".".
PATH_VECTORS = [
    ("config/app/db", "config.app.db"),
    ("/etc/hosts", "_root_.etc.hosts"),
    ("/", "_root_"),
    ("a", "a"),
    ("/a", "_root_.a"),
]


@pytest.mark.parametrize(("key", "stored"), BASE64_VECTORS)
def test_base64_vectors(key: str, stored: str) -> None:
    codec = Base64KeyCodec()
    assert codec.encode_key(key) == stored
    assert codec.decode_key(stored) == key


def test_base64_filters_keep_wildcard_tokens() -> None:
    # orbit.go base64_codec.go EncodeFilter: tokens equal to "*" or ">" are kept.
    codec = Base64KeyCodec()
    assert codec.encode_filter("Acme Inc.*") == "QWNtZSBJbmM.*"
    assert codec.encode_filter("Acme Inc.>") == "QWNtZSBJbmM.>"
    assert codec.encode_filter("*.contact") == "*.Y29udGFjdA"
    assert codec.encode_filter("a*") == "YSo"  # not a whole token: literal (61 2a -> Y S o)


@pytest.mark.parametrize(("key", "stored"), PATH_VECTORS)
def test_path_vectors(key: str, stored: str) -> None:
    codec = PathKeyCodec()
    assert codec.encode_key(key) == stored
    assert codec.decode_key(stored) == key


def test_path_trailing_slash_is_dropped_as_orbit_does() -> None:
    codec = PathKeyCodec()
    assert codec.encode_key("a/b/") == "a.b"
    assert codec.decode_key("a.b") == "a/b"
    assert codec.encode_filter("/logs/>") == "_root_.logs.>"
    assert codec.encode_filter("a/*") == "a.*"


def test_chain_path_then_base64() -> None:
    # Path first: "/a/b" -> "_root_.a.b"; then base64 per token -> "X3Jvb3Rf.YQ.Yg".
    codec = ChainKeyCodec(PathKeyCodec(), Base64KeyCodec())
    assert codec.encode_key("/a/b") == "X3Jvb3Rf.YQ.Yg"
    assert codec.decode_key("X3Jvb3Rf.YQ.Yg") == "/a/b"
    assert codec.encode_filter("/a/*") == "X3Jvb3Rf.YQ.*"


def test_noop_is_identity() -> None:
    codec = NoOpKeyCodec()
    assert codec.encode_key("a.b") == "a.b" == codec.decode_key("a.b")
    assert codec.encode_filter("a.>") == "a.>"


# -- refusals ----------------------------------------------------------------------------------


@pytest.mark.parametrize("key", ["", "a..b", ".a", "a.", "\ud800", 7])
def test_base64_refuses_keys_it_cannot_store(key: object) -> None:
    with pytest.raises(InvalidKeyError):
        Base64KeyCodec().encode_key(key)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    "stored",
    [
        "QQ==",  # padding: RawURLEncoding refuses '='
        "Q",  # a length of 1 mod 4 is never base64
        "a+b",  # the standard alphabet is not the URL one
        "YR",  # non-zero trailing bits: Go accepts it as "a"; we keep one stored form per key
        "_w",  # 0xff: not UTF-8
        "QQ..QQ",
    ],
)
def test_base64_refuses_stored_keys_it_did_not_make(stored: str) -> None:
    with pytest.raises(KeyDecodeError) as error:
        Base64KeyCodec().decode_key(stored)
    assert error.value.subject == stored
    assert isinstance(error.value, jetstream.JetStreamError)


@pytest.mark.parametrize("key", ["", "a.b", "_root_/x", "_root_", 3])
def test_path_refuses_ambiguous_keys(key: object) -> None:
    # "a.b" would share "a.b" with "a/b", "_root_/x" would share "_root_.x" with "/x".
    with pytest.raises(InvalidKeyError):
        PathKeyCodec().encode_key(key)  # type: ignore[arg-type]


def test_path_refuses_stored_keys_with_slashes() -> None:
    with pytest.raises(KeyDecodeError):
        PathKeyCodec().decode_key("a/b")


def test_chain_needs_key_codecs() -> None:
    with pytest.raises(jetstream.ClientValidationError):
        ChainKeyCodec()
    with pytest.raises(jetstream.ClientValidationError):
        ChainKeyCodec(object())  # type: ignore[arg-type]


class _Upper:
    """A key codec without encode_filter."""

    def encode_key(self, key: str) -> str:
        return key.upper()

    def decode_key(self, stored: str) -> str:
        return stored.lower()


def test_wildcards_need_a_filterable_codec() -> None:
    codec = _Upper()
    assert isinstance(codec, KeyCodec) and not isinstance(codec, FilterableKeyCodec)
    assert encode_filter(codec, "a.b") == "A.B"  # no wildcard: encoded as a key
    assert encode_filter(codec, ">") == ">"  # every key: nothing to encode
    with pytest.raises(FilterNotSupportedError):
        encode_filter(codec, "a.*")
    chain = ChainKeyCodec(Base64KeyCodec(), codec)
    with pytest.raises(FilterNotSupportedError):
        chain.encode_filter("a.>")
    assert chain.encode_filter(">") == ">"
    assert isinstance(FilterNotSupportedError("x"), InvalidKeyError)


# -- properties --------------------------------------------------------------------------------


def _matches(tokens: list[str], pattern: list[str]) -> bool:
    """NATS subject matching on token lists: '*' is one token, a final '>' one or more."""
    for index, want in enumerate(pattern):
        if want == ">":
            return len(tokens) > index
        if index >= len(tokens) or (want != "*" and want != tokens[index]):
            return False
    return len(tokens) == len(pattern)


_text_token = st.text(min_size=1, max_size=8).filter(lambda t: "." not in t)
_user_key = st.lists(_text_token, min_size=1, max_size=4)
# A key may have a token that is "*" or ">", but a filter cannot name one literally (it is a
# wildcard there, documented): keys for filter tests leave them out.
_filterable_key = st.lists(
    _text_token.filter(lambda t: t not in ("*", ">")), min_size=1, max_size=4
)


@st.composite
def _filter_for(draw: st.DrawFn, tokens: list[str]) -> list[str]:
    """A filter near ``tokens``: some replaced by '*', maybe cut short with '>', maybe changed."""
    out = [draw(st.sampled_from([t, "*", t + "x"])) for t in tokens]
    if draw(st.booleans()):
        out = [*out[: draw(st.integers(0, len(out) - 1))], ">"]
    return out


@settings(deadline=None)  # pure and fast; no timing flakes on a loaded machine
@given(_user_key)
def test_base64_round_trip(tokens: list[str]) -> None:
    codec = Base64KeyCodec()
    key = ".".join(tokens)
    stored = codec.encode_key(key)
    validate_key(stored)  # always a valid NATS KV key
    assert codec.decode_key(stored) == key
    assert codec.encode_key(codec.decode_key(stored)) == stored


@settings(deadline=None)  # pure and fast; no timing flakes on a loaded machine
@given(st.data(), _filterable_key)
def test_base64_filter_semantics(data: st.DataObject, tokens: list[str]) -> None:
    codec = Base64KeyCodec()
    pattern = data.draw(_filter_for(tokens))
    stored_key = codec.encode_key(".".join(tokens)).split(".")
    stored_filter = codec.encode_filter(".".join(pattern))
    validate_filter(stored_filter)
    assert _matches(tokens, pattern) == _matches(stored_key, stored_filter.split("."))


_segment = st.from_regex(r"[-_=a-zA-Z0-9]{1,6}", fullmatch=True).filter(lambda s: s != "_root_")
_path = st.tuples(st.booleans(), st.lists(_segment, min_size=1, max_size=4))


def _path_tokens(rooted: bool, segments: list[str]) -> list[str]:
    return ([""] if rooted else []) + segments  # the root is a token of its own


@settings(deadline=None)  # pure and fast; no timing flakes on a loaded machine
@given(_path)
def test_path_round_trip(path: tuple[bool, list[str]]) -> None:
    rooted, segments = path
    key = ("/" if rooted else "") + "/".join(segments)
    codec = PathKeyCodec()
    stored = codec.encode_key(key)
    validate_key(stored)
    assert codec.decode_key(stored) == key
    assert codec.encode_key(key + "/") == stored  # orbit drops one trailing slash


@settings(deadline=None)  # pure and fast; no timing flakes on a loaded machine
@given(st.data(), _path)
def test_path_filter_semantics(data: st.DataObject, path: tuple[bool, list[str]]) -> None:
    rooted, segments = path
    codec = PathKeyCodec()
    tokens = _path_tokens(rooted, segments)
    pattern = data.draw(_filter_for(tokens))
    # A first token "" (from a rooted key) is written as a leading "/": the root filter.
    text = "/".join(pattern)
    stored_filter = codec.encode_filter(text)
    validate_filter(stored_filter)
    stored_key = codec.encode_key(("/" if rooted else "") + "/".join(segments))
    assert _matches(tokens, pattern) == _matches(stored_key.split("."), stored_filter.split("."))


_unicode_segment = st.text(min_size=1, max_size=6).filter(
    lambda s: "/" not in s and "." not in s and not _has_surrogate(s)
)


def _has_surrogate(text: str) -> bool:
    return any("\ud800" <= c <= "\udfff" for c in text)


@settings(deadline=None)  # pure and fast; no timing flakes on a loaded machine
@given(st.booleans(), st.lists(_unicode_segment, min_size=1, max_size=4))
def test_chain_round_trip_any_text(rooted: bool, segments: list[str]) -> None:
    codec = ChainKeyCodec(PathKeyCodec(), Base64KeyCodec())
    key = ("/" if rooted else "") + "/".join(segments)
    if key.split("/", 1)[0] == "_root_":
        return
    stored = codec.encode_key(key)
    validate_key(stored)
    assert codec.decode_key(stored) == key


@pytest.mark.parametrize(
    ("codec", "pattern", "stored"),
    [
        # Cross-check with the expectations in orbit.go kvcodec/codec_test.go (filter tables
        # and the special-characters key): our hand derivation above agrees with them.
        (Base64KeyCodec(), "user.123", "dXNlcg.MTIz"),
        (Base64KeyCodec(), "app.*.config.>", "YXBw.*.Y29uZmln.>"),
        (
            Base64KeyCodec(),
            "test.key.with.special.chars!@#$%^&*()",
            "dGVzdA.a2V5.d2l0aA.c3BlY2lhbA.Y2hhcnMhQCMkJV4mKigp",
        ),
        (PathKeyCodec(), "/app/*/config/>", "_root_.app.*.config.>"),
        (PathKeyCodec(), "/foo/bar/", "_root_.foo.bar"),
        (NoOpKeyCodec(), "app.*.config.>", "app.*.config.>"),
    ],
)
def test_orbit_published_expectations(codec: FilterableKeyCodec, pattern: str, stored: str) -> None:
    assert codec.encode_filter(pattern) == stored
