"""What a cloud platform adds to pods of its accelerator nodes (today: GKE's TPU platform)."""
