"""The billing fake itself: the benchmark's figures are only as good as its arithmetic."""

from __future__ import annotations

from fakes.billing import CacheBilling

MARK = {"type": "ephemeral"}


def text(t: str, *, mark: bool = False) -> dict[str, object]:
    block: dict[str, object] = {"type": "text", "text": t}
    if mark:
        block["cache_control"] = MARK
    return block


def test_reads_the_longest_seen_prefix_and_writes_up_to_the_last_mark() -> None:
    billing = CacheBilling()
    first = {
        "system": [text("s" * 40, mark=True)],  # 10 tokens
        "messages": [{"role": "user", "content": [text("a" * 80, mark=True), text("b" * 8)]}],
    }
    bill = billing.bill(first)
    assert (bill.cache_read_tokens, bill.cache_write_tokens, bill.input_tokens) == (0, 30, 2)
    # Same text, cut into blocks differently, with one more mark further on.
    second = {
        "system": [text("s" * 40, mark=True)],
        "messages": [
            {
                "role": "user",
                "content": [text("a" * 40), text("a" * 40, mark=True), text("b" * 8, mark=True)],
            },
            {"role": "assistant", "content": "c" * 4},
        ],
    }
    bill = billing.bill(second)
    assert (bill.cache_read_tokens, bill.cache_write_tokens, bill.input_tokens) == (30, 2, 1)
    assert bill.cost == 30 * 0.1 + 2 * 1.25 + 1
    changed = {"system": "t" * 40, "messages": [{"role": "user", "content": "a" * 80}]}
    bill = billing.bill(changed)  # no marks: nothing read, nothing written
    assert (bill.cache_read_tokens, bill.cache_write_tokens, bill.input_tokens) == (0, 0, 30)


def test_automatic_prefix_caching_reads_in_steps_of_128_from_1024_tokens() -> None:
    from fakes.billing import AutoPrefixBilling

    billing = AutoPrefixBilling()

    def chat(*contents: str) -> dict[str, object]:
        return {"messages": [{"role": "user", "content": c} for c in contents]}

    short = chat("x" * 2000)  # 500 tokens: below the minimum, never cached
    assert billing.bill(short).cache_read_tokens == 0
    assert billing.bill(short).cache_read_tokens == 0
    long = chat("a" * 6000)  # 1 500+ tokens: cached once seen
    assert billing.bill(long).cache_read_tokens == 0
    grown = chat("a" * 6000, "b" * 400)
    bill = billing.bill(grown)
    # The shared prefix is the first message: whole steps of 128 tokens of it are read.
    assert bill.cache_read_tokens % 128 == 0
    assert 1024 <= bill.cache_read_tokens <= 6000 // 4
    assert bill.cache_read_tokens + bill.input_tokens == bill.total_tokens
    assert billing.bill(chat("c" * 6000)).cache_read_tokens == 0  # another prefix
