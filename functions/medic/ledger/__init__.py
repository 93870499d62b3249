"""The ledger: one DynamoDB table (pk S / sk S, TTL on `expires_at`), one store per kind of memory.

`table.Table` is the core (client, dry-run prefix, conditional writes, transactions, TTL); each
store owns its keys, conditions and item shapes. A handler builds the stores it uses over
`deps.table.for_mode(mode)`. Every item's key, owner, content and TTL: README.md beside this file.
"""
