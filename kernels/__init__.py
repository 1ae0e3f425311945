"""Batch-invariant kernels: Triton kernels with launch contracts, their CPU path, the sealed plan.

Public entry points: ``kernels.ops`` (the ops the engine calls), ``kernels.plan`` (plan_for,
preset_plan, SealedPlan, PlanEntry) and ``kernels.launch`` (use_plan, active_plan,
record_launches, PlanViolation). Importing the package imports nothing heavy: ``kernels.shapes``,
``kernels.configs`` and ``kernels.plan`` stay torch- and Triton-free.
"""
