"""GPU throughput: rollout generation (HF generate), the policy's token-statistics pass (COMPASS,
EM baselines), MiniLM embedding, and one bf16 training step, on a randomly initialised
Qwen3-architecture model built from a config (nothing downloaded).

Prints its figures and writes nothing. Without a CUDA GPU it says so and exits 0, so
`make bench` stays green on CPU machines; record real figures in benchmarks/RESULTS.md.
"""

import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
os.environ.setdefault("HF_HUB_OFFLINE", "1")

import torch  # noqa: E402

BATCH, PROMPT, NEW = 64, 128, 256
MICRO_BATCH = 8


def timed(fn):
    torch.cuda.synchronize()
    started = time.perf_counter()
    result = fn()
    torch.cuda.synchronize()
    return result, time.perf_counter() - started


def main() -> int:
    if not torch.cuda.is_available():
        print("bench_gpu: no CUDA GPU on this machine; nothing measured")
        return 0
    from transformers import AutoModelForCausalLM, Qwen3Config

    from rl.probes import token_statistics
    from rl.similarity import Embedder

    # about 0.6B parameters: Qwen3-0.6B's shape with a random initialisation
    config = Qwen3Config(vocab_size=151936, hidden_size=1024, intermediate_size=3072, num_hidden_layers=28,
                         num_attention_heads=16, num_key_value_heads=8, head_dim=128, tie_word_embeddings=True)
    torch.manual_seed(0)
    model = AutoModelForCausalLM.from_config(config, dtype=torch.bfloat16).cuda()
    print(f"device: {torch.cuda.get_device_name()}, policy: random Qwen3 {sum(p.numel() for p in model.parameters()) / 1e9:.2f}B bf16")

    prompts = torch.randint(0, config.vocab_size, (BATCH, PROMPT), device="cuda")
    generate = lambda: model.generate(input_ids=prompts, attention_mask=torch.ones_like(prompts), max_new_tokens=NEW,  # noqa: E731
                                      min_new_tokens=NEW, do_sample=True, top_k=0, pad_token_id=0)
    generate()  # warm-up
    out, seconds = timed(generate)
    print(f"generation (HF): {BATCH * NEW / seconds:,.0f} new tokens/s ({BATCH} x {NEW} tokens in {seconds:.2f}s)")

    completions = out[:, PROMPT:].tolist()
    prompt_ids = prompts.tolist()
    _, seconds = timed(lambda: token_statistics(model, prompt_ids, completions))
    print(f"token statistics: {BATCH * NEW / seconds:,.0f} tokens/s")

    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-6)

    # micro-batches with gradient accumulation, as the trainer's per-device batches are: the whole batch's
    # logits at once (64 x 384 x 151,936 in fp32) take 15 GiB and their gradients as much again
    def step():
        for micro in out.split(MICRO_BATCH):
            loss = model(input_ids=micro, labels=micro).loss / (BATCH // MICRO_BATCH)
            loss.backward()
        optimizer.step()
        optimizer.zero_grad()

    step()
    _, seconds = timed(step)
    print(f"training step (bf16, {BATCH} x {PROMPT + NEW} tokens in micro-batches of {MICRO_BATCH}): {seconds:.2f}s, "
          f"{BATCH * (PROMPT + NEW) / seconds:,.0f} tokens/s")

    embedder = Embedder(device="cuda")
    texts = [f"Step {i}: we add {i} and {i + 1} to get {2 * i + 1}. The answer is \\boxed{{{2 * i + 1}}}." for i in range(1024)]
    embedder.embed(texts)  # warm-up at the timed batch shapes
    _, seconds = timed(lambda: embedder.embed(texts))
    print(f"embedding (MiniLM, batches of {embedder.batch_size}): {len(texts) / seconds:,.0f} texts/s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
