"""The disttrain trainer: TensorFlow training driven by the TF_CONFIG the operator writes."""
