#!/usr/bin/env python3
"""Issue statistics of a kernel's main loop, read from a cubin without cuobjdump.

Each sm_70+ instruction is 128 bits; its upper 23 bits are control bits that ptxas
sets: a stall count (cycles before the warp may issue again: the "wait" stall ncu
reports), a yield bit, barrier indices and one operand-reuse flag per source slot.
For every kernel (.text.NAME section) of each cubin given, this finds the main loop
(the longest backward branch) and prints, over the loop body:

  instructions, the sum of their stall counts (and per instruction),
  FFMAs (register form), and the register-bank reads of those FFMAs: a source
  register not supplied by the reuse cache (same register, same slot, flagged on
  the previous FFMA) is read from bank (register % 2); each extra read of one
  bank in an instruction costs a cycle in this model.

On the H200 the model's count for the SIMT 128x256x8 tile (0.32 a loop instruction)
matched ncu's dispatch stalls (0.28 an issued instruction), and the stall sum (1.16)
its fixed-latency wait stalls (0.15 over one): docs/kernels/gemm_simt.md. The
branch-offset decoding is checked against cuobjdump on sm_90a code only.

usage: sass_stats.py FILE.cubin [FILE.cubin ...]
  (kiln_gemm_bench --compile-only --arch sm_90a --dump-kernels DIR writes them)
"""
import struct
import sys

FFMA_RRR = 0x223  # FFMA Rd, Ra, Rb, Rc
BRA = 0x947
RZ = 255


def text_sections(elf):
    """(name, bytes) of each .text.* section of a 64-bit little-endian ELF."""
    if elf[:4] != b"\x7fELF" or elf[4] != 2 or elf[5] != 1:
        raise ValueError("not a 64-bit little-endian ELF (a cubin)")
    shoff = struct.unpack_from("<Q", elf, 0x28)[0]
    shentsize, shnum, shstrndx = struct.unpack_from("<HHH", elf, 0x3A)
    headers = [struct.unpack_from("<IIQQQQ", elf, shoff + i * shentsize) for i in range(shnum)]
    strtab = headers[shstrndx][4]
    out = []
    for name_off, _, _, _, off, size in headers:
        end = elf.index(b"\0", strtab + name_off)
        name = elf[strtab + name_off:end].decode()
        if name.startswith(".text."):
            out.append((name[len(".text."):], elf[off:off + size]))
    return out


def branch_target(index, lo):
    """The instruction index a BRA at `index` jumps to (relative offset in bytes)."""
    hi32 = lo >> 32
    if hi32 & (1 << 31):
        hi32 -= 1 << 32
    return index + 1 + ((hi32 << 8) + 4 * ((lo >> 16) & 0xFF)) // 16


def loop_stats(code):
    words = [struct.unpack_from("<QQ", code, i) for i in range(0, len(code) - 15, 16)]
    loop = None
    for index, (lo, _) in enumerate(words):
        if lo & 0xFFF == BRA:
            target = branch_target(index, lo)
            if 0 <= target < index and (loop is None or index - target > loop[1] - loop[0]):
                loop = (target, index)
    if loop is None:
        return None
    instructions = stall = ffma = bank_cycles = 0
    previous_reuse = {}
    for lo, hi in words[loop[0]:loop[1] + 1]:
        instructions += 1
        stall += (hi >> 41) & 0xF
        if lo & 0xFFF != FFMA_RRR:
            previous_reuse = {}
            continue
        ffma += 1
        sources = [(lo >> 24) & 0xFF, (lo >> 32) & 0xFF, hi & 0xFF]
        reuse = (hi >> 58) & 0xF
        reads = [r for slot, r in enumerate(sources) if r != RZ and previous_reuse.get(slot) != r]
        previous_reuse = {slot: r for slot, r in enumerate(sources) if reuse >> slot & 1}
        banks = [r % 2 for r in reads]
        if len(banks) > 1:
            bank_cycles += max(banks.count(0), banks.count(1)) - 1
    return loop, instructions, stall, ffma, bank_cycles


def main(paths):
    if not paths:
        print(__doc__.strip().splitlines()[-2], file=sys.stderr)
        return 2
    status = 0
    for path in paths:
        try:
            with open(path, "rb") as f:
                sections = text_sections(f.read())
        except (OSError, ValueError) as e:
            print(f"{path}: {e}", file=sys.stderr)
            status = 1
            continue
        for name, code in sections:
            stats = loop_stats(code)
            if stats is None:
                print(f"{path}: {name}: no loop")
                continue
            (first, last), n, stall, ffma, bank = stats
            print(f"{path}: {name}: loop of {n} instructions [{first}, {last}], stall sum {stall} "
                  f"({stall / n:.3f} an instruction), FFMA {ffma}, bank conflicts {bank} ({bank / n:.3f})")
    return status


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
