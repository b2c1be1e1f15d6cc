//! A set of agents by index, as a membership bitmap: every message from every agent asks whether its
//! sender is awaited, so membership is a lookup, not a scan of up to a thousand agents.
pub struct Waiting {
    member: Vec<bool>,
    left: usize,
}

impl Waiting {
    /// Of a fleet of `agents`, those in `who`.
    pub fn new(agents: usize, who: impl IntoIterator<Item = usize>) -> Waiting {
        let mut w = Waiting {
            member: vec![false; agents],
            left: 0,
        };
        for i in who {
            w.insert(i);
        }
        w
    }

    pub fn insert(&mut self, i: usize) {
        if !std::mem::replace(&mut self.member[i], true) {
            self.left += 1;
        }
    }

    pub fn contains(&self, i: usize) -> bool {
        self.member[i]
    }

    pub fn remove(&mut self, i: usize) {
        if std::mem::take(&mut self.member[i]) {
            self.left -= 1;
        }
    }

    pub fn len(&self) -> usize {
        self.left
    }

    pub fn is_empty(&self) -> bool {
        self.left == 0
    }

    /// In fleet order.
    pub fn iter(&self) -> impl Iterator<Item = usize> + '_ {
        (0..self.member.len()).filter(|&i| self.member[i])
    }

    pub fn list(&self) -> Vec<usize> {
        self.iter().collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_each_member_once() {
        let mut w = Waiting::new(5, [3, 1, 3]);
        assert_eq!((w.len(), w.list()), (2, vec![1, 3]));
        w.remove(3);
        w.remove(3);
        w.insert(1);
        assert_eq!((w.len(), w.list()), (1, vec![1]));
        assert!(w.contains(1) && !w.contains(3));
        w.remove(1);
        assert!(w.is_empty());
    }
}
