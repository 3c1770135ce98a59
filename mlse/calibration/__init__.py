"""Cosine -> the 0-5 STS scale: the isotonic map (:mod:`mlse.calibration.isotonic`) and the calibrations fitted on
each backbone's weights (:mod:`mlse.calibration.backbone`)."""
