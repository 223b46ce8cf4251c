"""Plain data and plumbing every stage shares: cases, devices, contexts, errors, files, compat, env, records."""
