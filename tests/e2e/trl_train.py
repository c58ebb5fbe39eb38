"""TRL's own GRPOTrainer (the default policy, 2 steps, CPU), unmodified, as the TRL end-to-end tests run it:

    python tests/e2e/trl_train.py OUT --name NAME [--report-to mlflow|wandb|tensorboard] [--callback]
        [--log-completions] [--reward-weights 1.0 0.5]

Two conversational prompts (TRL applies the policy's chat template, and completions come back as messages) and two
reward functions; `--callback` adds Evolab's EvolabCallback (EVOLAB_URL, EVOLAB_TOKEN). Prints TRAINED at the end."""
import argparse

from datasets import Dataset
from trl import GRPOConfig, GRPOTrainer

parser = argparse.ArgumentParser()
parser.add_argument("out")
parser.add_argument("--name", required=True)
parser.add_argument("--report-to", nargs="*", default=[])
parser.add_argument("--callback", action="store_true")
parser.add_argument("--log-completions", action="store_true")
parser.add_argument("--reward-weights", type=float, nargs="*", default=None)
options = parser.parse_args()

rows = [{"prompt": [{"role": "user", "content": "Tom has 3 apples and gets 4 more. How many apples does Tom have?"}],
         "answer": "7"},
        {"prompt": [{"role": "user", "content": "What is 12 - 5?"}], "answer": "7"}]


def boxed_answer(completions, answer, **kwargs):
    return [1.0 if "\\boxed{" + a + "}" in c[0]["content"] else 0.0 for c, a in zip(completions, answer)]


def brevity(completions, **kwargs):
    return [-len(c[0]["content"]) / 100 for c in completions]


args = GRPOConfig(output_dir=options.out, max_steps=2, per_device_train_batch_size=8, num_generations=4,
                  max_completion_length=24, logging_steps=1, use_cpu=True, save_strategy="no", disable_tqdm=True,
                  report_to=options.report_to, run_name=options.name, seed=0, log_completions=options.log_completions,
                  reward_weights=options.reward_weights)
trainer = GRPOTrainer(model="rl/assets/default_policy", reward_funcs=[boxed_answer, brevity], args=args,
                      train_dataset=Dataset.from_list(rows))
if options.callback:
    from evolab_client.trl import EvolabCallback

    trainer.add_callback(EvolabCallback(name=options.name, experiment="trl-tests"))
trainer.train()
print("TRAINED", flush=True)
