"""The numeral models of Spithourakis & Riedel (2018), paper Table 4's rivals of the NSLM.

Reading order: ``vocab`` (the numeral vocabulary: each numeral's digits, precision and
value) → ``branches`` (the digit encoder, the d-RNN decoder, the mixture of Gaussians) →
``model`` (the numeral head on the LM: softmax, h-softmax, d-RNN, MoG, combination) →
``scoring`` (numeral perplexity, proper and adjusted, and each model's predicted value) →
``values`` (the NSLM's predicted values over the same candidates) and ``value_metrics``
(MAPE, MdAPE, MdAE and the candidate set).
"""
