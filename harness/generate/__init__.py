"""Where cases come from: strategies, corpora, profiles."""
