//! The humus examples: the wallet walkthrough (a wallet calling its ledger).
