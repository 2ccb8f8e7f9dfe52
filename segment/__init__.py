"""Multi-TPU segmentation on pyard: synthetic models, placement, the pipeline firmware, strategies."""
