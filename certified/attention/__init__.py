"""Attention maps in ball arithmetic, their Jacobians, certified spectral norms and
three-valued Lipschitz verdicts (theorems.md section 5; proofs/lipschitz.md)."""

from certified.attention.family import (
    FamilyPoint,
    search_lipschitz_lower,
    sqrt_n_family,
    tightness_configuration,
)
from certified.attention.flow_check import check_flow_gronwall
from certified.attention.hardmax_complexity import hardmax_sup_bounds
from certified.attention.instance import (
    AttentionInstance,
    parse_attention_instance,
    read_attention_instance,
)
from certified.attention.lipschitz import (
    LipschitzVerdict,
    check_attention_hypothesis,
    check_on_domain,
)
from certified.attention.maps import (
    attention_jacobian,
    attention_jvp,
    attention_map,
    attention_measure_map,
)
from certified.attention.mean_field import check_h3
from certified.attention.model import Attention, Head
from certified.attention.norms import (
    spectral_norm_bounds,
    spectral_norm_lower,
    spectral_norm_upper,
)
from certified.attention.populations import GaussianPopulation, UniformBox
from certified.attention.sample_complexity import (
    RateClaimVerdict,
    SupErrorBounds,
    check_rate_claim,
    rate_sweep,
    sup_error_bounds,
)

__all__ = [
    "Attention",
    "AttentionInstance",
    "FamilyPoint",
    "GaussianPopulation",
    "Head",
    "LipschitzVerdict",
    "RateClaimVerdict",
    "SupErrorBounds",
    "UniformBox",
    "attention_jacobian",
    "attention_jvp",
    "attention_map",
    "attention_measure_map",
    "check_attention_hypothesis",
    "check_flow_gronwall",
    "check_h3",
    "check_on_domain",
    "check_rate_claim",
    "hardmax_sup_bounds",
    "parse_attention_instance",
    "rate_sweep",
    "read_attention_instance",
    "search_lipschitz_lower",
    "spectral_norm_bounds",
    "spectral_norm_lower",
    "spectral_norm_upper",
    "sqrt_n_family",
    "sup_error_bounds",
    "tightness_configuration",
]
