"""Feedback text pieces: middle truncation with the count cut, stream capture (SPEC §2)."""

from __future__ import annotations

import signal

from sandbox.feedback import NO_OUTPUT, Clip, StreamCapture, cut_middle, finish, signal_line


def test_short_text_is_untouched():
    assert cut_middle([Clip.of("hello\n", 10), Clip.of("world", 10)], 20) == "hello\nworld"


def test_long_text_keeps_both_ends_and_says_how_much_was_cut():
    text = "".join(f"{i:05d}\n" for i in range(1000))  # 6000 chars
    out = cut_middle([Clip.of(text, 100)], 100)
    assert out.startswith(text[:50]) and out.endswith(text[-50:])
    assert "[... 5900 characters cut ...]" in out


def test_cut_spans_several_clipped_pieces():
    a, b = "a" * 1000, "b" * 1000
    out = cut_middle([Clip.of(a, 40), Clip.of(b, 40)], 40)
    assert out == "a" * 20 + "\n[... 1960 characters cut ...]\n" + "b" * 20


def test_stream_capture_counts_everything_keeps_ends_and_decodes_split_utf8():
    cap = StreamCapture(keep_chars=10, max_bytes=10**6)
    data = ("é" * 30 + "end").encode()
    for i in range(0, len(data), 7):  # chunks split multi-byte characters
        cap.feed(data[i : i + 7])
    clip = cap.clip()
    assert cap.total_chars == 33 and clip.total == 33
    assert clip.head == "é" * 10 and clip.tail == "é" * 7 + "end"
    assert cut_middle([clip], 10) == "é" * 5 + "\n[... 23 characters cut ...]\n" + "ééend"


def test_invalid_bytes_are_replaced_and_limit_is_flagged():
    cap = StreamCapture(keep_chars=10, max_bytes=4)
    cap.feed(b"\xff\xfeok")
    assert not cap.over_limit
    cap.feed(b"!")
    assert cap.over_limit and cap.clip().head == "\ufffd\ufffdok!"


def test_finish_and_signals():
    assert finish([], 100) == NO_OUTPUT
    assert finish([Clip.of("x\ud800\n", 10)], 100) == "x?"  # no lone surrogate leaves the service
    assert signal_line(signal.SIGXCPU, 3, 64)[0] == "resource_limit"
    assert signal_line(signal.SIGSEGV, 3, 64) == ("error", "Process terminated by SIGSEGV (Segmentation fault).")


def test_malformed_clip_records_are_visible_not_fatal():
    assert Clip.from_dict({"head": 1}).head == "[malformed output record]"
    assert Clip.from_dict({"head": "ab", "tail": "", "total": 2}).head == "ab"
