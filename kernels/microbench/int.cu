// Integer ALU microbenchmarks: IADD3, IMAD, IMAD.HI, LOP3, SHF, ISETP, IMNMX, POPC, PRMT (sm_90 SASS).
// Integer algebra is associative, so chains are cross-coupled (a += b; b += a) to stop
// ptxas from folding the unrolled body into one multiply.
#include "common.cuh"

#define INT_KERNEL(NAME, BODY)                                                      \
  extern "C" __global__ void NAME(MB_ARGS) {                                        \
    const unsigned* in = (const unsigned*)in_;                                      \
    unsigned t = MB_TID;                                                            \
    unsigned a0 = in[t & mask], a1 = in[(t + 1) & mask] ^ t;                        \
    unsigned a2 = a0 * 3u + t, a3 = a1 ^ 0x9e3779b9u;                               \
    MB_LOOP {                                                                       \
      MB_INNER {                                                                    \
        asm volatile(BODY : "+r"(a0), "+r"(a1), "+r"(a2), "+r"(a3));                \
      }                                                                             \
    }                                                                               \
    ((unsigned*)out_)[t] = a0 ^ a1 ^ a2 ^ a3;                                       \
  }

INT_KERNEL(mb_iadd3, "add.u32 %0, %0, %1;\n\tadd.u32 %1, %1, %0;\n\t"
                     "add.u32 %2, %2, %3;\n\tadd.u32 %3, %3, %2;")
INT_KERNEL(mb_imad, "mad.lo.u32 %0, %0, %1, %2;\n\tmad.lo.u32 %1, %1, %2, %3;\n\t"
                    "mad.lo.u32 %2, %2, %3, %0;\n\tmad.lo.u32 %3, %3, %0, %1;")
INT_KERNEL(mb_imad_hi, "mul.hi.u32 %0, %0, %1;\n\tmul.hi.u32 %1, %1, %2;\n\t"
                       "mul.hi.u32 %2, %2, %3;\n\tmul.hi.u32 %3, %3, %0;")
INT_KERNEL(mb_lop3, "lop3.b32 %0, %0, %1, %2, 0x96;\n\tlop3.b32 %1, %1, %2, %3, 0xe8;\n\t"
                    "lop3.b32 %2, %2, %3, %0, 0x1e;\n\tlop3.b32 %3, %3, %0, %1, 0x6a;")
INT_KERNEL(mb_shf, "shf.l.wrap.b32 %0, %0, %1, %2;\n\tshf.r.wrap.b32 %1, %1, %2, %3;\n\t"
                   "shf.l.wrap.b32 %2, %2, %3, %0;\n\tshf.r.wrap.b32 %3, %3, %0, %1;")
INT_KERNEL(mb_imnmx, "min.u32 %0, %0, %1;\n\tmax.u32 %1, %1, %2;\n\t"
                     "min.s32 %2, %2, %3;\n\tmax.s32 %3, %3, %0;")
INT_KERNEL(mb_popc, "popc.b32 %0, %1;\n\tpopc.b32 %1, %2;\n\t"
                    "popc.b32 %2, %3;\n\tpopc.b32 %3, %0;")
INT_KERNEL(mb_prmt, "prmt.b32 %0, %0, %1, 0x3210;\n\tprmt.b32 %1, %1, %2, 0x5140;\n\t"
                    "prmt.b32 %2, %2, %3, 0x7362;\n\tprmt.b32 %3, %3, %0, 0x1537;")
INT_KERNEL(mb_flo, "bfind.u32 %0, %1;\n\tbfind.u32 %1, %2;\n\t"
                   "bfind.u32 %2, %3;\n\tbfind.u32 %3, %0;")

// ISETP: compare chains that combine predicates; the final predicates feed a select
// once per unrolled step so the compares stay live.
extern "C" __global__ void mb_isetp(MB_ARGS) {
  const unsigned* in = (const unsigned*)in_;
  unsigned t = MB_TID;
  unsigned a0 = in[t & mask], a1 = in[(t + 1) & mask] ^ t, a2 = a0 + t, a3 = a1 ^ a0;
  MB_LOOP {
    MB_INNER {
      asm volatile("{\n\t.reg .pred p, q;\n\t"
                   "setp.lt.u32 p, %0, %1;\n\tsetp.ge.and.s32 p, %2, %3, p;\n\t"
                   "setp.ne.or.u32 q, %1, %2, p;\n\tsetp.gt.xor.s32 q, %3, %0, q;\n\t"
                   "setp.le.and.u32 p, %0, %2, q;\n\tsetp.eq.or.s32 q, %1, %3, p;\n\t"
                   "selp.b32 %0, %1, %0, q;\n\t}"
                   : "+r"(a0), "+r"(a1), "+r"(a2), "+r"(a3));
    }
  }
  ((unsigned*)out_)[t] = a0 ^ a1 ^ a2 ^ a3;
}
