"""The static validator: every rule of spec/validation.md over a HATP plan (structure, money, clock fit)
or over a saga artifact. May import core.signing and core.model; never the gateway, gated_tools, participant or
txn parts.
"""
