"""Cluster specs: the YAML spec, the CreateCluster request it renders to, tiers, and validation rules."""
