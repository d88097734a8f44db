//! A replay of NumPy's legacy global generator (`np.random.seed`, `random_sample`, `randn`, `choice`).
//! Written with stage 5.
