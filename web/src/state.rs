//! What every request shares.

use crate::args::Args;
use crate::databases::Databases;
use crate::masking::mask_password;
use crate::samples::Samples;
use crate::security::Security;

pub struct App {
    pub databases: Databases,
    pub samples: Samples,
    pub security: Security,
    pub read_only: bool,
    /// --database-url without its password, for the pages' footer.
    pub shown_url: String,
}

impl App {
    pub fn new(args: &Args) -> Result<App, String> {
        Ok(App {
            databases: Databases::new(&args.database_url, args.statement_timeout)?,
            samples: Samples::new(args.sample_interval),
            security: Security::new(args.token.clone()),
            read_only: args.read_only,
            shown_url: mask_password(&args.database_url),
        })
    }
}
