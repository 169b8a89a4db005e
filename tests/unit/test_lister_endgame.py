"""list_range's endgame (ListOptions.endgame_min_split_pages; the fleet's ENDGAME_QUIET_S and endgame_floor):
while endgame() gives a floor, a remainder too small for the policy's min_split_pages is split down to that
floor, never below endgame_min_split_pages nor above the policy's."""

from __future__ import annotations

from fakes import CountStats, FakeS3, Written
from hpcstage.inventory.lister import ListOptions, list_range
from hpcstage.inventory.model import KeyRange
from hpcstage.inventory.steal import SplitPolicy

PAGE = 10
KEYS = [f"k{i:05d}" for i in range(200)]  # 20 pages


def given_pieces(floor: float | None, endgame_pages: float | None) -> tuple[list[KeyRange], list[str]]:
    pieces: list[KeyRange] = []
    written = Written()
    ids = iter(range(10**6))
    pages = [0]

    def on_page(_o: int, _b: int) -> None:
        pages[0] += 1

    list_range(
        FakeS3(KEYS),
        "bkt",
        "",
        KeyRange(id="r0", end=KEYS[-1]),
        writer=written,
        stats=CountStats(),
        # one idle stream asks after the fifth page: 15 pages are left
        wanted=lambda: 1 if pages[0] == 5 else 0,
        give=pieces.extend,
        new_id=lambda: f"p{next(ids)}",
        options=ListOptions(
            page_size=PAGE,
            policy=SplitPolicy(min_split_pages=8, page_keys=PAGE),
            endgame_min_split_pages=endgame_pages,
        ),
        on_page=on_page,
        endgame=lambda: floor,
    )
    return pieces, written.keys


def test_a_remainder_under_two_minimum_pieces_is_split_only_in_the_endgame() -> None:
    # 15 pages left: not two pieces of 8, but two of 4 and more
    assert given_pieces(None, 4)[0] == []
    assert given_pieces(4, None)[0] == []  # no endgame minimum: the policy's holds
    pieces, written = given_pieces(4, 4)
    assert len(pieces) == 1 and pieces[0].start_after is not None and pieces[0].end == KEYS[-1]
    # the donor listed exactly up to the piece's start
    assert written == [k for k in KEYS if k <= pieces[0].start_after]
    assert 40 <= len(written) < 200


def test_the_endgame_floor_is_bounded_by_the_endgame_minimum_and_the_policy() -> None:
    # the fleet's floor of 8 (its pace says a piece of 15 pages ends with the fleet as two of 7.5 would not)
    assert given_pieces(8, 4)[0] == []
    # a floor above the policy's is the policy's: still no split of 15 pages into 8s
    assert given_pieces(20, 4)[0] == []
    # a floor below the endgame minimum is that minimum: 15 pages make pieces of 4 or more, not of 1
    pieces, _ = given_pieces(1, 4)
    assert len(pieces) == 1
    pieces, _ = given_pieces(7, 4)  # 15 pages: two pieces of 7.5
    assert len(pieces) == 1
