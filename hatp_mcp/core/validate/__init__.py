"""The static validator: every rule of spec/validation.md over a HATP plan (structure, money, clock fit)
or over a saga artifact. May import core.evidence and core.model; never the humans, gate, participant or txn parts.
"""
