"""list_range's endgame (ListOptions.endgame_min_split_pages; the fleet's ENDGAME_QUIET_S): while endgame() is
true, a remainder too small for the policy's min_split_pages is split down to the endgame's."""

from __future__ import annotations

from fakes import CountStats, FakeS3, Written
from hpcstage.inventory.lister import ListOptions, list_range
from hpcstage.inventory.model import KeyRange
from hpcstage.inventory.steal import SplitPolicy

PAGE = 10
KEYS = [f"k{i:05d}" for i in range(200)]  # 20 pages


def given_pieces(endgame: bool, endgame_pages: float | None) -> tuple[list[KeyRange], list[str]]:
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
        endgame=lambda: endgame,
    )
    return pieces, written.keys


def test_a_remainder_under_two_minimum_pieces_is_split_only_in_the_endgame() -> None:
    # 15 pages left: not two pieces of 8, but two of 4 and more
    assert given_pieces(False, 4)[0] == []
    assert given_pieces(True, None)[0] == []  # no endgame minimum: the policy's holds
    pieces, written = given_pieces(True, 4)
    assert len(pieces) == 1 and pieces[0].start_after is not None and pieces[0].end == KEYS[-1]
    # the donor listed exactly up to the piece's start
    assert written == [k for k in KEYS if k <= pieces[0].start_after]
    assert 40 <= len(written) < 200
