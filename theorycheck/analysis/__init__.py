"""Statistics of trained or optimal objects, training dynamics, loss landscapes.

============================  =====================================================
SPEC section                  module / function
============================  =====================================================
§4.1, §5.4 (pair classes)     :func:`stats.embedding_topic_stats`, :func:`stats.topic_block_sums`
§5.1 (attention classes)      :func:`stats.attention_class_averages`, :func:`stats.effective_K`
§4.5, §5.2 (two stages)       :func:`stats.detect_stages`, :func:`dynamics.stage2_onset`
§4.3 (landscape, sweeps)      :func:`landscape.alpha_beta_grid`, :func:`landscape.asymptotic_sweep`
============================  =====================================================
"""

from . import dynamics, landscape, stats

__all__ = ["stats", "dynamics", "landscape"]
