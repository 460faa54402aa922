"""Micro-models over a frozen pretrained Transformer (SmolLM2-135M by default), scored in
bits per byte against the Transformer alone (docs/transformer.md).

Reading order, each module at the stage of what it does:

- ``checkpoint`` (models): a llama GGUF or Hugging Face directory → float32 weights under
  transformers' names and the checkpoint's own byte-level BPE tokenizer;
- ``backbone`` (models): the frozen LlamaForCausalLM as a scorer, in overlapping windows:
  per-token log-probabilities, hidden states and token-set masses;
- ``alignment`` (data): where each corpus token lies in the plain text and which
  Transformer tokens spell it;
- ``candidates`` (models): the class members as token sequences, their trie, and the tokens
  that extend a word;
- ``class_head`` (models): P(c | h) on the Transformer's hidden state;
- ``passes`` (scores): one text through the Transformer, kept in the run as safetensors;
- ``mixture`` (scores): the proper word-level mixture of the Transformer and the
  micro-models, token by token, and its whole next-token distribution;
- ``scoring`` (scores): the mixture over a scored text, the weights λ_c, the sums-to-one
  check;
- ``run`` (runs): the run directory, its backbone and the opened run;
- ``fit`` (training): micro.json, the class head and λ_c into the run;
- ``tables`` (evaluation): bits per byte overall and per class, word perplexity;
- ``predict`` (generation): the next words after a prompt, with the class × micro-model
  breakdown;
- ``generate`` (generation): text sampled from the mixture, token by token;
- ``commands`` (generation): what the commands call: fit a run, open it (its micro-models
  alone for ``nslm micro plot``), predict, evaluate a text.
"""
