#!/usr/bin/env python3
"""PyTorch baselines for the whole-model benchmarks (issue 7 section 6).

Times PyTorch eager and torch.compile(mode="reduce-overhead") in fp16 on the
architectures that kiln's model generators build (models/README.md,
models/architectures.cc), written here in plain torch.nn so that neither
`transformers` nor `torchvision` is needed. Weights are random: this is for timing.

    python3 benchmarks/torch_baseline.py                       # the issue-7 list, eager + compile
    python3 benchmarks/torch_baseline.py --models bert_base:1,resnet50:128 --modes eager
    python3 benchmarks/torch_baseline.py --csv torch.csv --attention eager,sdpa

Timing protocol (the same as `kiln bench`): --warmup runs, then --iters runs
enqueued back to back on the current stream with a CUDA event recorded before the
first and after each run; the time of run i is the elapsed time between events i and
i+1 (device time per run; for eager this includes the gaps where the GPU waits for
the Python launches). median / min / p90 use linear interpolation between order
statistics, as kiln bench does. compile_s is the wall time of torch.compile's first
call (tracing, Inductor, Triton compilation), measured separately and not part of the
warm-up. peak_mem_bytes is torch.cuda.max_memory_allocated from the moment the fp16
module and its inputs exist through compiling and running (reset per model and mode,
less what was still allocated before the module was built): fp16 weights + inputs +
activations + workspaces (+ the CUDA graph pool for compile).

--attention eager (the default) writes attention as the HF "eager" modules do
(MatMul, scale, mask, Softmax, MatMul): the pattern of the ONNX files kiln compiles.
--attention sdpa uses F.scaled_dot_product_attention instead (what current HF models
run by default: flash / memory-efficient kernels); CNN models ignore it.
"""

import argparse
import csv
import datetime
import gc
import math
import os
import sys
import time
import traceback

DEFAULT_MODELS = "bert_base:1,bert_base:32,gpt2:8,vit_b16:1,resnet50:1,resnet50:128,distilbert:1,mobilenet_v2:1"
CSV_FIELDS = [
    "model", "batch", "mode", "attention", "median_ms", "min_ms", "p90_ms", "compile_s", "peak_mem_bytes",
    "params", "torch_version", "gpu", "status",
]
TRANSFORMERS = ("bert_base", "distilbert", "gpt2", "vit_b16")
CNNS = ("resnet50", "mobilenet_v2")

# Parameter counts of kiln's generators at the default sizes (models/README.md), for the
# cross-check printed with each model.
EXPECTED_PARAMS_M = {"bert_base": 108.6, "distilbert": 66.4, "gpt2": 124.4, "vit_b16": 86.6, "resnet50": 25.6,
                     "mobilenet_v2": 3.5}


def percentile(values, q):
    """kiln bench's Percentile: linear interpolation between sorted values."""
    if not values:
        return 0.0
    v = sorted(values)
    pos = q * (len(v) - 1)
    lo = int(math.floor(pos))
    hi = min(lo + 1, len(v) - 1)
    return v[lo] + (v[hi] - v[lo]) * (pos - lo)


def log(*args):
    print(*args, flush=True)


def define_models(torch):
    """The architectures, as plain torch.nn modules (imported lazily: torch is optional
    for --help and for syntax checks)."""
    nn = torch.nn
    F = torch.nn.functional

    def attention(q, k, v, scale, mask_fn, impl, sdpa_mask=None, causal=False):
        """q, k, v: [B, A, S, D]. eager: HF's eager pattern; sdpa: F.scaled_dot_product_attention."""
        if impl == "sdpa":
            return F.scaled_dot_product_attention(q, k, v, attn_mask=sdpa_mask, is_causal=causal)
        s = torch.matmul(q, k.transpose(-1, -2)) / scale
        s = mask_fn(s)
        p = torch.softmax(s, dim=-1)
        return torch.matmul(p, v)

    def split_heads(x, heads):
        b, s, h = x.shape
        return x.view(b, s, heads, h // heads).permute(0, 2, 1, 3)

    def merge_heads(x):
        b, a, s, d = x.shape
        return x.permute(0, 2, 1, 3).reshape(b, s, a * d)

    class GeluErf(nn.Module):  # HF "gelu": x * 0.5 * (1 + erf(x / sqrt 2))
        def forward(self, x):
            return x * 0.5 * (1.0 + torch.erf(x / math.sqrt(2.0)))

    class GeluTanh(nn.Module):  # HF NewGELUActivation (GPT-2)
        def forward(self, x):
            return 0.5 * x * (1.0 + torch.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * torch.pow(x, 3.0))))

    # ---------------------------------------------------------------- BERT (post-LN)
    class BertLayer(nn.Module):
        def __init__(self, hidden, heads, ffn, impl):
            super().__init__()
            self.heads, self.impl, self.scale = heads, impl, math.sqrt(hidden // heads)
            self.query, self.key, self.value = (nn.Linear(hidden, hidden) for _ in range(3))
            self.attn_out = nn.Linear(hidden, hidden)
            self.attn_norm = nn.LayerNorm(hidden, eps=1e-12)
            self.intermediate = nn.Linear(hidden, ffn)
            self.act = GeluErf()
            self.output = nn.Linear(ffn, hidden)
            self.out_norm = nn.LayerNorm(hidden, eps=1e-12)

        def forward(self, x, mask):  # mask: additive [B,1,1,S]
            q = split_heads(self.query(x), self.heads)
            k = split_heads(self.key(x), self.heads)
            v = split_heads(self.value(x), self.heads)
            c = attention(q, k, v, self.scale, lambda s: s + mask, self.impl, sdpa_mask=mask)
            a = self.attn_norm(self.attn_out(merge_heads(c)) + x)
            return self.out_norm(self.output(self.act(self.intermediate(a))) + a)

    class BertBase(nn.Module):
        """bert_base: word embedding Gather + constant position embedding + LN, L BertLayers."""

        def __init__(self, batch, seq=128, hidden=768, heads=12, ffn=3072, layers=12, vocab=30522, impl="eager"):
            super().__init__()
            self.word_embeddings = nn.Embedding(vocab, hidden)
            self.position_embeddings = nn.Parameter(torch.randn(1, seq, hidden) * 0.02)
            self.norm = nn.LayerNorm(hidden, eps=1e-12)
            self.layers = nn.ModuleList(BertLayer(hidden, heads, ffn, impl) for _ in range(layers))
            self.input_shapes = {"input_ids": ((batch, seq), vocab), "attention_mask": ((batch, 1, 1, seq), "zeros")}

        def forward(self, input_ids, attention_mask):
            h = self.norm(self.word_embeddings(input_ids) + self.position_embeddings)
            for layer in self.layers:
                h = layer(h, attention_mask)
            return h

    # ---------------------------------------------------------------- DistilBERT (post-LN)
    class DistilBertLayer(nn.Module):
        def __init__(self, hidden, heads, ffn, impl):
            super().__init__()
            self.heads, self.impl, self.scale = heads, impl, math.sqrt(hidden // heads)
            self.q_lin, self.k_lin, self.v_lin, self.out_lin = (nn.Linear(hidden, hidden) for _ in range(4))
            self.sa_layer_norm = nn.LayerNorm(hidden, eps=1e-12)
            self.lin1, self.lin2 = nn.Linear(hidden, ffn), nn.Linear(ffn, hidden)
            self.act = GeluErf()
            self.output_layer_norm = nn.LayerNorm(hidden, eps=1e-12)

        def forward(self, x, mask):  # mask: int64 [B,S], 1 = attend
            b, s, _ = x.shape
            q = split_heads(self.q_lin(x), self.heads)
            k = split_heads(self.k_lin(x), self.heads)
            v = split_heads(self.v_lin(x), self.heads)
            if self.impl == "sdpa":
                c = F.scaled_dot_product_attention(q, k, v, attn_mask=(mask != 0).view(b, 1, 1, s))
            else:
                q = q / self.scale  # DistilBERT scales q, not the scores
                scores = torch.matmul(q, k.transpose(2, 3))
                m = (mask == 0).view(b, 1, 1, s).expand_as(scores)
                scores = scores.masked_fill(m, torch.finfo(scores.dtype).min)
                c = torch.matmul(torch.softmax(scores, dim=-1), v)
            sa = self.sa_layer_norm(self.out_lin(merge_heads(c)) + x)
            return self.output_layer_norm(self.lin2(self.act(self.lin1(sa))) + sa)

    class DistilBert(nn.Module):
        def __init__(self, batch, seq=128, hidden=768, heads=12, ffn=3072, layers=6, vocab=30522, impl="eager"):
            super().__init__()
            self.word_embeddings = nn.Embedding(vocab, hidden)
            self.position_embeddings = nn.Embedding(512, hidden)
            self.register_buffer("position_ids", torch.arange(seq).unsqueeze(0), persistent=False)
            self.norm = nn.LayerNorm(hidden, eps=1e-12)
            self.layers = nn.ModuleList(DistilBertLayer(hidden, heads, ffn, impl) for _ in range(layers))
            self.input_shapes = {"input_ids": ((batch, seq), vocab), "attention_mask": ((batch, seq), "ones")}

        def forward(self, input_ids, attention_mask):
            h = self.word_embeddings(input_ids) + self.position_embeddings(self.position_ids)
            h = self.norm(h)
            for layer in self.layers:
                h = layer(h, attention_mask)
            return h

    # ---------------------------------------------------------------- GPT-2 (pre-LN, LM head)
    class Conv1D(nn.Module):
        """HF Conv1D: addmm(bias, x.view(-1, in), W[in, out]).view(..., out)."""

        def __init__(self, nx, nf):
            super().__init__()
            self.weight = nn.Parameter(torch.randn(nx, nf) / math.sqrt(nx))
            self.bias = nn.Parameter(torch.randn(nf) * 0.1)

        def forward(self, x):
            shape = x.shape[:-1] + (self.weight.shape[1],)
            return torch.addmm(self.bias, x.view(-1, x.shape[-1]), self.weight).view(shape)

    class Gpt2Block(nn.Module):
        def __init__(self, hidden, heads, ffn, seq, impl):
            super().__init__()
            self.heads, self.impl, self.hidden, self.scale = heads, impl, hidden, math.sqrt(hidden // heads)
            self.ln_1 = nn.LayerNorm(hidden, eps=1e-5)
            self.c_attn, self.c_proj = Conv1D(hidden, 3 * hidden), Conv1D(hidden, hidden)
            self.ln_2 = nn.LayerNorm(hidden, eps=1e-5)
            self.c_fc, self.mlp_proj = Conv1D(hidden, ffn), Conv1D(ffn, hidden)
            self.act = GeluTanh()
            # HF's causal `bias` buffer (lower-triangular), stored inverted: the positions to fill.
            self.register_buffer("future", ~torch.tril(torch.ones(seq, seq, dtype=torch.bool)).view(1, 1, seq, seq),
                                 persistent=False)

        def forward(self, x):
            q, k, v = self.c_attn(self.ln_1(x)).split(self.hidden, dim=2)
            q, k, v = (split_heads(t, self.heads) for t in (q, k, v))

            def mask(s):  # torch.where(bias, s, finfo.min), as HF's _attn
                return s.masked_fill(self.future, torch.finfo(s.dtype).min)

            c = attention(q, k, v, self.scale, mask, self.impl, causal=True)
            r = self.c_proj(merge_heads(c)) + x
            return r + self.mlp_proj(self.act(self.c_fc(self.ln_2(r))))

    class Gpt2(nn.Module):
        """GPT2LMHeadModel (small at the defaults), use_cache=False, LM head tied to wte."""

        def __init__(self, batch, seq=128, hidden=768, heads=12, ffn=3072, layers=12, vocab=50257, impl="eager"):
            super().__init__()
            self.seq = seq
            self.wte = nn.Embedding(vocab, hidden)
            self.wpe = nn.Embedding(1024, hidden)
            self.register_buffer("position_ids", torch.arange(seq).unsqueeze(0), persistent=False)
            self.h = nn.ModuleList(Gpt2Block(hidden, heads, ffn, seq, impl) for _ in range(layers))
            self.ln_f = nn.LayerNorm(hidden, eps=1e-5)
            self.lm_head = nn.Linear(hidden, vocab, bias=False)
            self.lm_head.weight = self.wte.weight  # tied
            self.input_shapes = {"input_ids": ((batch, seq), vocab)}

        def forward(self, input_ids):
            ids = input_ids.view(-1, self.seq)
            h = self.wte(ids) + self.wpe(self.position_ids)
            for block in self.h:
                h = block(h)
            return self.lm_head(self.ln_f(h))

    # ---------------------------------------------------------------- ViT-B/16 (pre-LN)
    class VitLayer(nn.Module):
        def __init__(self, hidden, heads, ffn, impl):
            super().__init__()
            self.heads, self.impl, self.scale = heads, impl, math.sqrt(hidden // heads)
            self.layernorm_before = nn.LayerNorm(hidden, eps=1e-12)
            self.query, self.key, self.value, self.dense = (nn.Linear(hidden, hidden) for _ in range(4))
            self.layernorm_after = nn.LayerNorm(hidden, eps=1e-12)
            self.intermediate, self.output = nn.Linear(hidden, ffn), nn.Linear(ffn, hidden)
            self.act = GeluErf()

        def forward(self, x):
            n = self.layernorm_before(x)
            q, k, v = (split_heads(lin(n), self.heads) for lin in (self.query, self.key, self.value))
            c = attention(q, k, v, self.scale, lambda s: s, self.impl)
            r = self.dense(merge_heads(c)) + x
            return self.output(self.act(self.intermediate(self.layernorm_after(r)))) + r

    class VitB16(nn.Module):
        """ViTForImageClassification (google/vit-base-patch16-224 configuration)."""

        def __init__(self, batch, image=224, hidden=768, heads=12, ffn=3072, layers=12, classes=1000, impl="eager"):
            super().__init__()
            tokens = (image // 16) ** 2 + 1
            self.projection = nn.Conv2d(3, hidden, kernel_size=16, stride=16)
            self.cls_token = nn.Parameter(torch.randn(1, 1, hidden) * 0.02)
            self.position_embeddings = nn.Parameter(torch.randn(1, tokens, hidden) * 0.02)
            self.layers = nn.ModuleList(VitLayer(hidden, heads, ffn, impl) for _ in range(layers))
            self.layernorm = nn.LayerNorm(hidden, eps=1e-12)
            self.classifier = nn.Linear(hidden, classes)
            self.input_shapes = {"pixel_values": ((batch, 3, image, image), "normal")}

        def forward(self, pixel_values):
            p = self.projection(pixel_values).flatten(2).transpose(1, 2)
            cls = self.cls_token.expand(p.shape[0], -1, -1)
            h = torch.cat((cls, p), dim=1) + self.position_embeddings
            for layer in self.layers:
                h = layer(h)
            return self.classifier(self.layernorm(h)[:, 0, :])

    # ---------------------------------------------------------------- ResNet-50 (torchvision, v1.5)
    def conv_bn(cin, cout, k, stride=1, pad=0, groups=1):
        return [nn.Conv2d(cin, cout, k, stride=stride, padding=pad, groups=groups, bias=False), nn.BatchNorm2d(cout)]

    class Bottleneck(nn.Module):
        def __init__(self, cin, planes, stride, downsample):
            super().__init__()
            self.conv1, self.bn1 = conv_bn(cin, planes, 1)
            self.conv2, self.bn2 = conv_bn(planes, planes, 3, stride, 1)
            self.conv3, self.bn3 = conv_bn(planes, 4 * planes, 1)
            self.relu = nn.ReLU(inplace=True)
            self.downsample = nn.Sequential(*conv_bn(cin, 4 * planes, 1, stride)) if downsample else None

        def forward(self, x):
            out = self.relu(self.bn1(self.conv1(x)))
            out = self.relu(self.bn2(self.conv2(out)))
            out = self.bn3(self.conv3(out))
            identity = x if self.downsample is None else self.downsample(x)
            return self.relu(out + identity)

    class ResNet50(nn.Module):
        def __init__(self, batch, image=224, width=64, classes=1000, impl="eager"):
            super().__init__()
            del impl
            self.conv1, self.bn1 = conv_bn(3, width, 7, 2, 3)
            self.relu = nn.ReLU(inplace=True)
            self.maxpool = nn.MaxPool2d(kernel_size=3, stride=2, padding=1)
            blocks, cin = [], width
            for stage, n in enumerate((3, 4, 6, 3)):
                planes = width << stage
                for j in range(n):
                    blocks.append(Bottleneck(cin, planes, 2 if (stage > 0 and j == 0) else 1, j == 0))
                    cin = 4 * planes
            self.blocks = nn.Sequential(*blocks)
            self.fc = nn.Linear(cin, classes)
            self.input_shapes = {"x": ((batch, 3, image, image), "normal")}

        def forward(self, x):
            h = self.maxpool(self.relu(self.bn1(self.conv1(x))))
            h = self.blocks(h)
            return self.fc(torch.flatten(F.adaptive_avg_pool2d(h, (1, 1)), 1))

    # ---------------------------------------------------------------- MobileNetV2 (torchvision)
    def conv_bn_relu6(cin, cout, k, stride=1, groups=1):
        return nn.Sequential(*conv_bn(cin, cout, k, stride, (k - 1) // 2, groups), nn.ReLU6(inplace=True))

    class InvertedResidual(nn.Module):
        def __init__(self, cin, cout, stride, expand):
            super().__init__()
            hidden = cin * expand
            self.use_res = stride == 1 and cin == cout
            layers = [conv_bn_relu6(cin, hidden, 1)] if expand != 1 else []
            layers += [conv_bn_relu6(hidden, hidden, 3, stride, groups=hidden), *conv_bn(hidden, cout, 1)]
            self.conv = nn.Sequential(*layers)

        def forward(self, x):
            return x + self.conv(x) if self.use_res else self.conv(x)

    class MobileNetV2(nn.Module):
        def __init__(self, batch, image=224, classes=1000, impl="eager"):
            super().__init__()
            del impl
            features, cin = [conv_bn_relu6(3, 32, 3, 2)], 32
            for t, c, n, s in ((1, 16, 1, 1), (6, 24, 2, 2), (6, 32, 3, 2), (6, 64, 4, 2), (6, 96, 3, 1),
                               (6, 160, 3, 2), (6, 320, 1, 1)):
                for i in range(n):
                    features.append(InvertedResidual(cin, c, s if i == 0 else 1, t))
                    cin = c
            features.append(conv_bn_relu6(cin, 1280, 1))
            self.features = nn.Sequential(*features)
            self.classifier = nn.Sequential(nn.Dropout(0.2), nn.Linear(1280, classes))
            self.input_shapes = {"x": ((batch, 3, image, image), "normal")}

        def forward(self, x):
            h = F.adaptive_avg_pool2d(self.features(x), (1, 1))
            return self.classifier(torch.flatten(h, 1))

    return {"bert_base": BertBase, "distilbert": DistilBert, "gpt2": Gpt2, "vit_b16": VitB16, "resnet50": ResNet50,
            "mobilenet_v2": MobileNetV2}


def init_weights(torch, model):
    """kiln's conventions (models/README.md): matmul/conv weights N(0, 1/fan_in), biases
    N(0, 0.1^2), norm scale N(1, 0.1^2) / shift N(0, 0.1^2), running var U[0.5, 1.5),
    embeddings N(0, 0.02^2). Keeps activations of order 1 so fp16 stays finite."""
    nn = torch.nn
    with torch.no_grad():
        for m in model.modules():  # embeddings last: GPT-2's LM head shares wte's weight
            if isinstance(m, nn.Embedding):
                continue
            if isinstance(m, (nn.Linear, nn.Conv2d)):
                fan_in = m.weight[0].numel()
                m.weight.normal_(0.0, 1.0 / math.sqrt(fan_in))
                if m.bias is not None:
                    m.bias.normal_(0.0, 0.1)
            elif isinstance(m, (nn.LayerNorm, nn.BatchNorm2d)):
                m.weight.normal_(1.0, 0.1)
                m.bias.normal_(0.0, 0.1)
                if isinstance(m, nn.BatchNorm2d):
                    m.running_mean.normal_(0.0, 0.1)
                    m.running_var.uniform_(0.5, 1.5)
        for m in model.modules():
            if isinstance(m, nn.Embedding):
                m.weight.normal_(0.0, 0.02)


def make_inputs(torch, shapes, generator):
    inputs = []
    for shape, kind in shapes.values():
        if isinstance(kind, int):  # token ids uniform in [0, vocab): never all zeros
            t = torch.randint(0, kind, shape, generator=generator, device="cuda", dtype=torch.int64)
        elif kind == "ones":  # int64 attention mask, every position visible
            t = torch.ones(shape, device="cuda", dtype=torch.int64)
        elif kind == "zeros":  # additive float mask, every position visible
            t = torch.zeros(shape, device="cuda", dtype=torch.float16)
        else:
            t = torch.randn(shape, generator=generator, device="cuda", dtype=torch.float32).half()
        inputs.append(t)
    return inputs


def time_runs(torch, step, iters):
    """kiln bench's protocol: runs back to back, an event between consecutive runs."""
    events = [torch.cuda.Event(enable_timing=True) for _ in range(iters + 1)]
    events[0].record()
    for i in range(iters):
        step()
        events[i + 1].record()
    torch.cuda.synchronize()
    return [events[i].elapsed_time(events[i + 1]) for i in range(iters)]


def run_one(torch, classes, name, batch, mode, impl, args):
    """Builds, (compiles,) times one configuration; returns the CSV row's measured fields."""
    torch._dynamo.reset()
    gc.collect()
    torch.cuda.empty_cache()
    torch.cuda.reset_peak_memory_stats()
    base = torch.cuda.memory_allocated()  # left over from earlier configurations (should be ~0)
    torch.manual_seed(args.seed)
    with torch.device("cuda"):
        model = classes[name](batch, impl=impl)
    init_weights(torch, model)
    model = model.half().eval()
    if args.channels_last and name in CNNS:
        model = model.to(memory_format=torch.channels_last)
    params = sum(p.numel() for p in model.parameters())
    gen = torch.Generator(device="cuda")
    gen.manual_seed(args.seed)
    inputs = make_inputs(torch, model.input_shapes, gen)
    if args.channels_last and name in CNNS:
        inputs = [t.contiguous(memory_format=torch.channels_last) for t in inputs]
    # The peak from here on: the module is built in fp32 and then halved, and that
    # transient fp32 copy is no part of inference (the fp16 weights stay counted).
    gc.collect()
    torch.cuda.reset_peak_memory_stats()
    mark_step = getattr(getattr(torch, "compiler", None), "cudagraph_mark_step_begin", None)
    compile_s = ""
    with torch.inference_mode():
        fn = model
        if mode == "compile":
            fn = torch.compile(model, mode="reduce-overhead", dynamic=False)
            torch.cuda.synchronize()
            t0 = time.perf_counter()
            out = fn(*inputs)
            torch.cuda.synchronize()
            compile_s = time.perf_counter() - t0
            log(f"    compiled in {compile_s:.1f} s")

        def step():
            if mode == "compile" and mark_step is not None:
                mark_step()
            return fn(*inputs)

        for _ in range(args.warmup):
            out = step()
        torch.cuda.synchronize()
        finite = bool(torch.isfinite(out.float()).all().item())
        times = time_runs(torch, step, args.iters)
    peak = torch.cuda.max_memory_allocated() - base
    del fn, model, inputs, out
    return {
        "median_ms": percentile(times, 0.5), "min_ms": percentile(times, 0.0), "p90_ms": percentile(times, 0.9),
        "compile_s": compile_s, "peak_mem_bytes": peak, "params": params,
        "status": "ok" if finite else "ok (non-finite output)",
    }


def cross_check(torch, classes):
    """Parameter counts against kiln's generators and, where importable, torchvision /
    transformers (built on the meta device: no memory, no weights)."""
    ours = {}
    for name, cls in classes.items():
        try:
            with torch.device("meta"):
                ours[name] = sum(p.numel() for p in cls(1).parameters())
        except Exception as e:  # noqa: BLE001 - the timing runs report it again
            log(f"  {name:13s} cannot be built: {type(e).__name__}: {e}")
            continue
        log(f"  {name:13s} {ours[name] / 1e6:8.2f} M parameters (kiln's generator: {EXPECTED_PARAMS_M[name]} M)")
    try:
        import torchvision  # noqa: F401  (optional)
        from torchvision import models as tvm
        for name, fn in (("resnet50", tvm.resnet50), ("mobilenet_v2", tvm.mobilenet_v2)):
            with torch.device("meta"):
                n = sum(p.numel() for p in fn().parameters())
            log(f"  torchvision {name}: {n} parameters, ours {ours.get(name)} "
                f"({'same' if n == ours.get(name) else 'DIFFERENT'})")
    except Exception as e:  # noqa: BLE001 - optional cross-check only
        log(f"  torchvision cross-check skipped: {type(e).__name__}: {e}")
    try:
        import transformers
        checks = (
            # GPT2LMHeadModel ties lm_head to wte: same count as ours.
            ("gpt2", lambda: transformers.GPT2LMHeadModel(transformers.GPT2Config()), 0),
            ("distilbert", lambda: transformers.DistilBertModel(transformers.DistilBertConfig()), 0),
            # ViTForImageClassification has no pooler: same count.
            ("vit_b16", lambda: transformers.ViTForImageClassification(transformers.ViTConfig(num_labels=1000)), 0),
            # BertModel also has token-type embeddings (2 x 768) and the pooler (768 x 768 + 768), which
            # bert_base leaves out; its position table is 512 x 768 where ours holds the 128 used rows.
            ("bert_base", lambda: transformers.BertModel(transformers.BertConfig()),
             2 * 768 + 768 * 768 + 768 + (512 - 128) * 768),
        )
        for name, build, extra in checks:
            with torch.device("meta"):
                n = sum(p.numel() for p in build().parameters())
            log(f"  transformers {name}: {n} parameters - {extra} not in kiln's model = {n - extra}, ours "
                f"{ours.get(name)} ({'same' if n - extra == ours.get(name) else 'DIFFERENT'})")
    except Exception as e:  # noqa: BLE001 - optional cross-check only
        log(f"  transformers cross-check skipped: {type(e).__name__}: {e}")


def parse_models(text, known):
    out = []
    for item in filter(None, (s.strip() for s in text.split(","))):
        name, _, batch = item.partition(":")
        if name not in known:
            raise SystemExit(f"--models: unknown model '{name}' (models: {', '.join(known)})")
        try:
            b = int(batch) if batch else 1
        except ValueError:
            raise SystemExit(f"--models: '{item}': the batch after ':' must be an integer") from None
        if b < 1:
            raise SystemExit(f"--models: '{item}': the batch must be positive")
        out.append((name, b))
    if not out:
        raise SystemExit("--models: empty list")
    return out


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--models", default=DEFAULT_MODELS, help="comma-separated MODEL:BATCH list (default: %(default)s)")
    p.add_argument("--modes", default="eager,compile", help="eager, compile or both (default: %(default)s)")
    p.add_argument("--attention", default="eager",
                   help="eager (HF eager pattern, as in kiln's ONNX files), sdpa, or both comma-separated")
    p.add_argument("--iters", type=int, default=50, help="timed runs (default: %(default)s)")
    p.add_argument("--warmup", type=int, default=10, help="warm-up runs before timing, >= 1 (default: %(default)s)")
    p.add_argument("--csv", help="write the rows here (rewritten after every model, so a cut-off run keeps its rows)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--channels-last", action="store_true", help="CNNs in channels_last memory format")
    p.add_argument("--time-budget", type=float, default=0,
                   help="seconds; start no new configuration after this much time (0: no limit)")
    p.add_argument("--cross-check", action="store_true",
                   help="compare parameter counts with kiln's generators and torchvision/transformers if importable")
    args = p.parse_args()
    if args.iters < 1 or args.warmup < 1:
        raise SystemExit("--iters and --warmup must be >= 1")
    modes = [m.strip() for m in args.modes.split(",") if m.strip()]
    impls = [a.strip() for a in args.attention.split(",") if a.strip()]
    if not modes or any(m not in ("eager", "compile") for m in modes):
        raise SystemExit(f"--modes: expected eager and/or compile, got '{args.modes}'")
    if not impls or any(a not in ("eager", "sdpa") for a in impls):
        raise SystemExit(f"--attention: expected eager and/or sdpa, got '{args.attention}'")
    models = parse_models(args.models, list(EXPECTED_PARAMS_M))

    import torch  # late: --help and argument errors need no torch

    if not torch.cuda.is_available():
        raise SystemExit("no CUDA GPU visible to PyTorch")
    classes = define_models(torch)
    torch.backends.cudnn.benchmark = True
    gpu = torch.cuda.get_device_name()
    log(f"torch {torch.__version__}, CUDA {torch.version.cuda}, cuDNN {torch.backends.cudnn.version()}, GPU {gpu}, "
        f"{datetime.date.today().isoformat()}; fp16, {args.warmup} warm-up + {args.iters} timed runs")
    if args.cross_check:
        cross_check(torch, classes)

    # Cheap configurations first: all eager rows, then the compiles (a cut-off run keeps
    # the most rows); sdpa after the eager-attention rows. CNNs have no attention variant.
    jobs = []
    for impl in impls:
        for mode in modes:
            for name, batch in models:
                if impl == "sdpa" and name in CNNS:
                    continue
                jobs.append((name, batch, mode, "-" if name in CNNS else impl))
    rows = []
    start = time.perf_counter()
    for i, (name, batch, mode, impl) in enumerate(jobs):
        row = {"model": name, "batch": batch, "mode": mode, "attention": impl, "torch_version": torch.__version__,
               "gpu": gpu}
        elapsed = time.perf_counter() - start
        if args.time_budget and elapsed > args.time_budget:
            log(f"[{i + 1}/{len(jobs)}] {name}:{batch} {mode} ({impl}) skipped: {elapsed:.0f} s > --time-budget")
            row["status"] = "skipped (time budget)"
        else:
            log(f"[{i + 1}/{len(jobs)}] {name}:{batch} {mode} (attention {impl}) at {elapsed:.0f} s ...")
            try:
                row.update(run_one(torch, classes, name, batch, mode, "eager" if impl == "-" else impl, args))
                log(f"    median {row['median_ms']:.4f} ms (min {row['min_ms']:.4f}, p90 {row['p90_ms']:.4f}), "
                    f"peak {row['peak_mem_bytes'] / 2**20:.1f} MiB, {row['params'] / 1e6:.1f} M params, "
                    f"{row['status']}")
            except Exception as e:  # noqa: BLE001 - one failure must not lose the other rows
                msg = f"{type(e).__name__}: {e}".splitlines()[0][:300]
                log(f"    FAILED: {msg}")
                traceback.print_exc(limit=3, file=sys.stdout)
                sys.stdout.flush()
                row["status"] = f"error: {msg}"
                torch._dynamo.reset()
                gc.collect()
                torch.cuda.empty_cache()
        rows.append(row)
        if args.csv:
            write_csv(args.csv, rows)

    log("")
    log(f"PyTorch {torch.__version__} on {gpu}, fp16, median of {args.iters} runs after {args.warmup} warm-up "
        f"(total {time.perf_counter() - start:.0f} s)")
    log(f"{'model':13s} {'batch':>5s} {'mode':8s} {'attn':5s} {'median_ms':>10s} {'min_ms':>9s} {'p90_ms':>9s} "
        f"{'compile_s':>9s} {'peak_MiB':>9s}  status")
    for r in rows:
        if "median_ms" not in r:
            log(f"{r['model']:13s} {r['batch']:5d} {r['mode']:8s} {r['attention']:5s} {'-':>10s} {'-':>9s} "
                f"{'-':>9s} {'-':>9s} {'-':>9s}  {r['status']}")
            continue
        cs = f"{r['compile_s']:.1f}" if r["compile_s"] != "" else "-"
        log(f"{r['model']:13s} {r['batch']:5d} {r['mode']:8s} {r['attention']:5s} {r['median_ms']:10.4f} "
            f"{r['min_ms']:9.4f} {r['p90_ms']:9.4f} {cs:>9s} {r['peak_mem_bytes'] / 2**20:9.1f}  {r['status']}")
    if args.csv:
        log(f"csv -> {args.csv}")
    return 0 if all(r.get("status", "").startswith("ok") for r in rows) else 1


def write_csv(path, rows):
    tmp = path + ".tmp"
    with open(tmp, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=CSV_FIELDS, extrasaction="ignore")
        w.writeheader()
        for r in rows:
            out = dict(r)
            for k in ("median_ms", "min_ms", "p90_ms"):
                if k in out:
                    out[k] = f"{out[k]:.4f}"
            if out.get("compile_s", "") != "":
                out["compile_s"] = f"{out['compile_s']:.2f}"
            w.writerow(out)
    os.replace(tmp, path)


if __name__ == "__main__":
    sys.exit(main())
