// The end of an attention kernel's source (codegen/ops/attention.cc puts it after
// attention_sm80.cuh or attention_sm90.cuh): the generator's defines, which both
// templates take, are undefined, so that the next kernel of the module defines its own.
#undef ATTN_BF16
#undef ATTN_SQ
#undef ATTN_SK
#undef ATTN_D
#undef ATTN_DV
#undef ATTN_DP
#undef ATTN_DVP
#undef ATTN_Q_LD
#undef ATTN_K_LD
#undef ATTN_V_LD
#undef ATTN_O_LD
#undef ATTN_K_TRANS
#undef ATTN_K_ASYNC
#undef ATTN_BM
#undef ATTN_BN
#undef ATTN_SPLITS
#undef ATTN_OVERLAP
#undef ATTN_Q_PROLOGUE
#undef ATTN_CAUSAL_LIMIT
#undef ATTN_T
#undef KILN_ATTN_PARAMS
#undef KILN_ATTN_ARGS
