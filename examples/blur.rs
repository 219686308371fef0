//! The main job: blur an image on the GPU. Arrives with its issue (Gaussian masks, 2D kernels).

fn main() {
    println!("the blur example arrives with the 2D convolution and Gaussian-mask issues");
}
