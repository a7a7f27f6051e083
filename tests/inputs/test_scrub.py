"""scrub's quick answer for text that holds nothing it could mask is the full answer: the shortcut that
skips the three patterns for ordinary table cells never lets a credential through."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from hyperpod_scheduler.inputs.redact import _scrub_all, scrub

# Pieces of what the patterns look for, and look-alikes (IGNORECASE's non-ASCII folds: 'ı', 'K', 'ſ').
PIECES = st.sampled_from(
    [
        "https://",
        "user:pw@",
        "@",
        "=",
        "?token=",
        "&sig=",
        ";key=",
        "endpoint",
        'Endpoint URL: "',
        "ENDPOINT:",
        "endpoınt: ",
        "\u212a",
        "\u017f",
        "host",
        " ",
        "/",
        "?",
        "#",
        "abc",
    ]
)
TEXT = st.one_of(st.text(max_size=60), st.lists(st.one_of(PIECES, st.text(max_size=4)), max_size=12).map("".join))


@settings(max_examples=400, deadline=None)
@given(TEXT)
def test_the_quick_answer_is_the_full_answer(text: str) -> None:
    assert scrub(text) == _scrub_all(text)


def test_the_credentials_are_still_masked() -> None:
    assert scrub('Could not connect to the endpoint URL: "https://admin:S3CRETPW@h/?token=t"') == (
        'Could not connect to the endpoint URL: "https://***@h/?***"'
    )
    assert scrub("see https://u:p@example.com/x?a=1&token=abc") == "see https://***@example.com/x?a=1&token=***"
    assert scrub("p5-training  stop  window ends 18:00") == "p5-training  stop  window ends 18:00"
