"""Attention maps in ball arithmetic, their Jacobians, certified spectral norms and
three-valued Lipschitz verdicts (theorems.md section 5; proofs/lipschitz.md)."""

from certified.attention.family import (
    FamilyPoint,
    search_lipschitz_lower,
    sqrt_n_family,
    tightness_configuration,
)
from certified.attention.flow_check import check_flow_gronwall
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

__all__ = [
    "Attention",
    "AttentionInstance",
    "FamilyPoint",
    "Head",
    "LipschitzVerdict",
    "attention_jacobian",
    "attention_jvp",
    "attention_map",
    "attention_measure_map",
    "check_attention_hypothesis",
    "check_flow_gronwall",
    "check_h3",
    "check_on_domain",
    "parse_attention_instance",
    "read_attention_instance",
    "search_lipschitz_lower",
    "spectral_norm_bounds",
    "spectral_norm_lower",
    "spectral_norm_upper",
    "sqrt_n_family",
    "tightness_configuration",
]
