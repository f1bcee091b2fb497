"""Subscriptions: the runs' resources change as runs go (`run_updates`), and the run listing's subscribers are
told when a run starts or finishes (`listing_updates`)."""
