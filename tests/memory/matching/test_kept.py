"""claims_kept (issue 59.4): a merged or summarised text keeps every claim of its originals with
its role and adds none. Made-up texts, none from the labelled sets."""

from memory.matching.kept import claims_kept

FIRMWARE = ["Firmware 3.2.5 fixes printer error P0417.", "Firmware 3.2.4 still shows printer error P0417."]
VPN = [
    "The VPN client 5.1.8 shows error E4012 on macOS.",
    "VPN sessions time out after 8 idle hours.",
    "VPN logins need a hardware key.",
    "The VPN client must be version 5.1 or newer.",
]


def test_a_faithful_merge_is_accepted():
    ok, why = claims_kept(
        ["The canteen opens at 8:00.", "The canteen closes at 15:00 on Fridays."],
        "The canteen opens at 8am and closes at 3pm on Fridays.",
    )
    assert ok, why


def test_a_merge_that_moves_the_fixing_version_is_refused():
    """Every word of the candidate is in the originals; only the roles moved."""
    ok, why = claims_kept(FIRMWARE, "Firmware 3.2.4 fixes printer error P0417, which 3.2.5 still shows.")
    assert not ok and why.startswith("swaps"), why


def test_a_summary_that_drops_a_claim_is_refused():
    ok, why = claims_kept(
        VPN,
        "VPN sessions time out after eight idle hours, logins need a hardware key and the client must be 5.1 or newer.",
    )
    assert not ok and why.startswith("drops") and ("E4012" in why or "5.1.8" in why), why


def test_a_flipped_denial_is_refused():
    ok, why = claims_kept(
        ["Guests cannot bring dogs into the lounge.", "The lounge opens at 7:00."],
        "The lounge opens at 7:00 and guests can bring dogs in.",
    )
    assert not ok and why.startswith("inverts"), why


def test_an_invented_number_is_refused():
    ok, why = claims_kept(
        ["The lounge opens at 7:00.", "The lounge is on the second floor."],
        "The lounge on the second floor opens at 7:00 and seats 40.",
    )
    assert not ok and why.startswith("invents") and "40" in why, why


def test_a_blank_candidate_is_refused():
    assert claims_kept(["The lounge opens at 7:00."], "  ") == (False, "the text is blank")
