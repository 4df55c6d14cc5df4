"""The static validator: every rule of spec/validation.md over a HATP plan (structure, money, clock fit)
or over a saga artifact. May import core.signing and core.model; never the gateway, gated_tools, participant or
txn parts.

- validator.py: `validate` over a Plan and `validate_document` over untrusted JSON: every violation, not the first;
- violation.py: one violation: the rule it breaks, where, and what to do;
- money_rules.py: the money rules (HATP-VAL-5..8): signs, `settles`, approval amounts, mandate caps;
- clockfit.py: clock fit: the worst case before commit of a plan, per mode, in the plan's own numbers;
- saga.py: saga plan artifacts (the apology-protocol format) and their rules, reported under that validator's names;
- saga_view.py: the saga reader: a plan read straight from its JSON as the rules read it; compiled;
- saga_rules.py: the saga rules over what the reader gives; compiled with the reader.
"""
