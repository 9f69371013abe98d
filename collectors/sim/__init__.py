"""The cluster simulator: a simulated NVML and kernel files below the real collector.

Everything it produces is labelled as simulated (``SimNVML.SIMULATED``; the agent's
batches then carry ``agent.simulated: true``). See docs/simulator.md.
"""
