"""GPU smoke tests: a bf16 training step, generation and embedding on CUDA. Skipped without a GPU.

The policy is a randomly initialised Qwen3-architecture model built from a config, so nothing
is downloaded; throughput is printed (benchmarks/bench_gpu.py measures it more carefully).
"""

import time

import pytest
import torch

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")


def tiny_qwen3():
    from transformers import AutoModelForCausalLM, Qwen3Config

    config = Qwen3Config(vocab_size=4096, hidden_size=256, intermediate_size=768, num_hidden_layers=4,
                         num_attention_heads=4, num_key_value_heads=2, head_dim=64, max_position_embeddings=2048)
    torch.manual_seed(0)
    return AutoModelForCausalLM.from_config(config, dtype=torch.bfloat16).cuda()


def test_a_bf16_training_step_of_a_qwen3_model_updates_its_weights():
    model = tiny_qwen3()
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    input_ids = torch.randint(0, 4096, (8, 128), device="cuda")
    before = model.lm_head.weight.detach().clone()
    loss = model(input_ids=input_ids, labels=input_ids).loss
    loss.backward()
    optimizer.step()
    assert torch.isfinite(loss)
    assert not torch.equal(before, model.lm_head.weight)


def test_generation_on_the_gpu_produces_every_requested_token():
    model = tiny_qwen3().eval()
    prompts = torch.randint(0, 4096, (64, 32), device="cuda")
    started = time.perf_counter()
    out = model.generate(input_ids=prompts, attention_mask=torch.ones_like(prompts), max_new_tokens=64,
                         min_new_tokens=64, do_sample=True, temperature=1.0, top_k=0, pad_token_id=0)
    torch.cuda.synchronize()
    seconds = time.perf_counter() - started
    assert out.shape == (64, 96)
    print(f"\ngeneration: {64 * 64 / seconds:.0f} tokens/s (64 x 64 new tokens, random Qwen3, bf16)")


def test_token_statistics_run_on_the_gpu_in_bf16():
    from rl.probes import token_statistics

    model = tiny_qwen3().eval()
    stats = token_statistics(model, [[1, 2, 3]] * 4, [[4, 5, 6, 7]] * 4)
    assert all(len(s.entropy) == 4 and all(h >= -1e-3 for h in s.entropy) for s in stats)


def test_the_embedder_runs_on_the_gpu():
    from rl.similarity import Embedder

    embedder = Embedder(device="cuda")
    texts = [f"Step {i}: 3 + {i} = {3 + i}. The answer is \\boxed{{{3 + i}}}." for i in range(256)]
    started = time.perf_counter()
    vectors = embedder.embed(texts)
    seconds = time.perf_counter() - started
    assert vectors.shape == (256, embedder.dimension)
    print(f"\nembedding: {256 / seconds:.0f} texts/s (MiniLM)")


def test_the_trained_policy_keeps_fp32_weights_so_the_papers_learning_rate_moves_them(tmp_path):
    """A bf16 checkpoint, as real models ship, trained for 10 AdamW steps at 5e-7 under bf16 autocast (GRPOConfig's
    bf16): loaded by rl.policy.load_trainable_model the weights move; kept in bf16 most updates round away."""
    from transformers import AutoModelForCausalLM

    from rl.policy import DEFAULT_POLICY_DIR, load_trainable_model

    AutoModelForCausalLM.from_pretrained(DEFAULT_POLICY_DIR, dtype=torch.bfloat16).save_pretrained(tmp_path)

    def share_moved(model) -> float:
        model = model.cuda().train()
        optimizer = torch.optim.AdamW(model.parameters(), lr=5e-7, weight_decay=0.0)
        before = [p.detach().clone() for p in model.parameters()]
        torch.manual_seed(0)
        ids = torch.randint(0, model.config.vocab_size, (8, 64), device="cuda")
        for _ in range(10):
            with torch.autocast("cuda", dtype=torch.bfloat16):
                loss = model(input_ids=ids, labels=ids).loss
            loss.backward()
            optimizer.step()
            optimizer.zero_grad()
        moved = sum((p.detach() != b).sum().item() for p, b in zip(model.parameters(), before))
        return moved / sum(b.numel() for b in before)

    fp32, bf16 = share_moved(load_trainable_model(tmp_path)), share_moved(
        AutoModelForCausalLM.from_pretrained(tmp_path, dtype="auto"))
    print(f"\nshare of weights moved by 10 AdamW steps at 5e-7: fp32 weights {fp32:.3f}, bf16 weights {bf16:.3f}")
    assert fp32 > 0.9 and bf16 < 0.5
