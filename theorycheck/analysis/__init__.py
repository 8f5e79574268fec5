"""Statistics of trained or optimal objects, training dynamics, loss landscapes, phase diagrams.

============================  =====================================================
SPEC section                  module / function
============================  =====================================================
§4.1, §5.4 (pair classes)     :func:`stats.embedding_topic_stats`, :func:`stats.topic_block_sums`
§5.1 (attention classes)      :func:`stats.attention_class_averages`
§4.5, §5.2 (two stages)       :func:`stats.detect_stages`, :func:`dynamics.stage2_onset`
§4.3 (landscape, sweeps)      :func:`landscape.alpha_beta_grid`, :func:`landscape.asymptotic_sweep`
§4.2, §4.3, §11.6 (topic      :mod:`topic_structure`, the one home of the topic statistics of a
statistics, any labelling)    token matrix: :func:`~topic_structure.topic_gap` /
                              :func:`~topic_structure.matrix_topic_stats` (the same-minus-different
                              gap), :func:`~topic_structure.block_contrast`,
                              :func:`~topic_structure.block_score`,
                              :func:`~topic_structure.effective_K`,
                              :func:`~topic_structure.topic_attention_ratio`,
                              :func:`~topic_structure.attention_preference`
§11.6 (phase diagrams)        :func:`phase.phase_diagram`, :func:`phase.find_boundary`,
                              :func:`phase.diagram_boundaries`
============================  =====================================================
"""

from . import dynamics, landscape, phase, stats, topic_structure
from .phase import PhaseDiagram, diagram_boundaries, find_boundary, phase_diagram
from .topic_structure import TopicStructure, attention_preference, matrix_topic_stats, topic_gap

__all__ = [
    "stats",
    "dynamics",
    "landscape",
    "phase",
    "topic_structure",
    "PhaseDiagram",
    "phase_diagram",
    "find_boundary",
    "diagram_boundaries",
    "TopicStructure",
    "matrix_topic_stats",
    "topic_gap",
    "attention_preference",
]
