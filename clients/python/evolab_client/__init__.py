"""Report GRPO runs trained anywhere to Evolab (DESIGN §4.8): `evolab sync verl DIR --run RUN`,
`evolab_client.trl.EvolabCallback` for TRL's GRPOTrainer, and `Evolab` for any other trainer."""
from .client import Evolab, EvolabError, RunRef

__all__ = ["Evolab", "EvolabError", "RunRef"]
__version__ = "0.1.0"
