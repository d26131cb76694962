"""The realignment of one 16-byte chunk from the two aligned blocks it straddles, for families that
splice it into their own text: REALIGN16 is `pair_blocks` and `realign16` of
hgemm/include/hgemm/realign.cuh, from the comment that opens them to the end marker, read from the
header so that the header is the one place the code lives. Kernels that include <hgemm/common.cuh> get it as
hgemm::realign16."""

from __future__ import annotations

from hgemm.candidate import INCLUDE_DIR

BEGIN, END = "// A chunk of 8 fp16 elements", "// (end realign16)\n"
_HEADER = (INCLUDE_DIR / "hgemm" / "realign.cuh").read_text()
REALIGN16 = _HEADER[_HEADER.index(BEGIN):_HEADER.index(END) + len(END)]
